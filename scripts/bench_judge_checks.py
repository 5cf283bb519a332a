"""What the judge's round-two checks cost per command (issue 29), written into docs/benchmarks.md.

    PYTHONPATH=. python3 scripts/bench_judge_checks.py [--device cuda] [--calls 200]

On one real candidate runner (relu_scale with its correct kernel), per timed call: the judge's
wall clock around the `time` command, the stop and resume of the candidate's sandbox around it
(sandbox.freezer, outside that clock), the judge's cache flush before it, the checks of the
reply's schema (runner_replies) and of the call (judge.judge_call: outputs, inputs, census);
and what one call costs under the dispatch observer (a share of timed calls, untimed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmark_doc import markers, write_section  # noqa: E402 (scripts/ is on sys.path)

BEGIN, END = markers("judge-checks")


def _ms(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


def measure(device: str, calls: int) -> dict[str, list[float]]:
    from gpu_workers.harness.build import workspace
    from gpu_workers.harness.judge import judge as judge_mod
    from gpu_workers.harness.judge import runner_process
    from gpu_workers.harness.judge.judge import Judge
    from gpu_workers.harness.judge.protocol import LOOSE
    from gpu_workers.harness.session import Session

    folder = "gpu/" if device == "cuda" else ""
    source = (REPO / "tests" / "fixtures" / "problems" / f"{folder}relu_scale.py").read_text()
    samples: dict[str, list[float]] = {}

    def add(name: str, ms: float) -> None:
        samples.setdefault(name, []).append(ms)

    with Session(source, device=device) as session:
        fixture = REPO / "tests" / "fixtures" / "candidates" / device / "good_relu_scale"
        workspace.copy_candidate(session.workspace, fixture)
        built = session._compile_result()
        assert built.ok, built.log
        judge = Judge(device, LOOSE)
        reference = session._reference_runner()
        candidate = runner_process.start_candidate(
            session.root, built.extension_dir, device, LOOSE, 120
        )
        slot = judge_mod.TIMING_SLOTS[0]
        try:
            expected = judge.make_set(reference, slot, seed=7)
            for index in range(calls + 1):
                _one_call(judge, candidate, expected, slot, observe=index % 4 == 0, add=add)
        finally:
            candidate.close()
            judge.free()
    return {name: values[1:] for name, values in samples.items()}  # the first call warms up


def _one_call(judge, candidate, expected, slot: int, observe: bool, add) -> None:
    from gpu_workers.harness.judge import judge as judge_mod
    from gpu_workers.harness.judge import runner_replies

    lent = judge.lend_to_candidate(candidate, slot)
    add("judge's cache flush", _ms(judge.flush_caches))
    request = {"fn": "candidate", "slot": slot, "into": "lent"}
    reply = candidate.call("time", **request)
    add("`time` command, on the judge's clock", candidate.last_wall_ms)
    add("reply schema check", _ms(lambda: runner_replies.check("time", request, reply)))
    checks = _ms(lambda: judge_mod.judge_call(judge, expected, lent, reply, "bench"))
    add("judge_call (outputs, inputs, census)", checks)
    add("resume + stop the sandbox", _ms(candidate._freezer.thaw) + _ms(candidate._freeze))
    if observe:
        observed = _ms(lambda: candidate.call("time", **request, observe=True))
        add("an observed call (untimed, one round in four)", observed)


def render(samples: dict[str, list[float]], env: dict, command: str) -> str:
    lines = [
        BEGIN,
        "## The judge's round-two checks, per command (issue 29)",
        "",
        f"Command: `{command}` on {env['device_name']} (torch {env['torch']}). One candidate "
        "runner (relu_scale, its correct kernel); medians and 90th percentiles over the calls.",
        "",
        "| per timed call | p50 ms | p90 ms | calls |",
        "| --- | --- | --- | --- |",
    ]
    for name, values in samples.items():
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) >= 10 else max(values)
        lines.append(f"| {name} | {statistics.median(values):.3f} | {p90:.3f} | {len(values)} |")
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    from gpu_workers.harness import settings
    from gpu_workers.harness.judge import environment

    samples = measure(args.device, args.calls)
    described = environment.describe(args.device, settings.gpu_index())
    host = f"the cpu target ({described.get('host')}, {os.cpu_count()} cores)"
    env = {"device_name": described.get("gpu") or host}
    env["torch"] = described.get("torch")
    command = "PYTHONPATH=. python3 scripts/bench_judge_checks.py " + " ".join(sys.argv[1:])
    section = render(samples, env, command.strip())
    write_section(args.out, "judge-checks", section)
    print(section)


if __name__ == "__main__":
    main()
