"""python -m gpu_workers.harness validate PROBLEM.py | evaluate PROBLEM.py CANDIDATE_DIR

Exit 0: valid problem / correct candidate; 1: rejected (reasons and violations printed);
2: unusable input, with a one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_REJECTED, EXIT_UNUSABLE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpu_workers.harness")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("validate", "check that a KernelBench-format problem can be optimised"),
        ("evaluate", "compile, verify and profile a candidate for a problem"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("problem", type=Path)
        if name == "evaluate":
            cmd.add_argument("candidate_dir", type=Path, help="holds model_new.py and kernels/")
        cmd.add_argument("--device", choices=("cuda", "cpu"), default=None)
        cmd.add_argument("--protocol", default="loose", help="loose or fp32-strict")
        cmd.add_argument("--json", action="store_true", help="print the verdict as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        source = _read(args.problem)
        if args.command == "evaluate" and not (args.candidate_dir / "model_new.py").is_file():
            raise ValueError(f"{args.candidate_dir} has no model_new.py")
        from gpu_workers.harness import settings
        from gpu_workers.harness.judge import protocol

        proto = protocol.by_name(args.protocol)
        device = settings.check_device(args.device or settings.default_device())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    if args.command == "validate":
        return _validate(source, device, proto, args.json)
    return _evaluate(source, args.candidate_dir, device, proto, args.json)


def _read(path: Path) -> str:
    if not path.is_file():
        raise ValueError(f"{path} does not exist")
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None


def _validate(source: str, device: str, proto, as_json: bool) -> int:
    from gpu_workers.harness.judge import validation

    report = validation.validate(source, device, proto)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.ok:
        print(
            f"valid on {device}: eager {report.eager_ms:.4f} ms, torch.compile "
            f"{report.compile_ms:.4f} ms, {report.flops} FLOPs, {report.bytes_moved} bytes"
        )
    else:
        print("rejected: " + "; ".join(report.reasons))
    return EXIT_OK if report.ok else EXIT_REJECTED


def _evaluate(source: str, candidate_dir: Path, device: str, proto, as_json: bool) -> int:
    from gpu_workers.harness.build import workspace
    from gpu_workers.harness.runner.problem import ProblemError
    from gpu_workers.harness.session import Session, verdict_ok

    try:
        session = Session(source, device=device, protocol=proto, candidates=1)
    except ProblemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    with session:
        try:
            workspace.copy_candidate(session.workspace, candidate_dir)
        except (ValueError, PermissionError, UnicodeDecodeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
        verdict = session.evaluate()
    print(json.dumps(verdict, indent=2) if as_json else summarize(verdict))
    return EXIT_OK if verdict_ok(verdict) else EXIT_REJECTED


def summarize(verdict: dict) -> str:
    """A few readable lines: what failed and why, or the speedups."""
    comp, ver, prof = verdict["compile"], verdict["verify"], verdict["profile"]
    if not comp["ok"]:
        return "compile failed:\n" + comp["log"]
    lines = [f"compiled in {comp['seconds']:.1f} s{' (cached)' if comp['cached'] else ''}"]
    if not ver["ok"]:
        lines.append("verify failed" + (f": {ver['error']}" if ver["error"] else ""))
        lines += [f"  {v['code']}: {v['detail']}" for v in ver["violations"]]
        return "\n".join(lines)
    lines.append(
        f"verified: {ver['trials']} trials, max abs err {ver['max_abs_err']:.3g}, "
        f"rel err {ver['max_rel_err']:.3g}"
    )
    if prof.get("error"):
        lines.append(f"profile failed: {prof['error']}")
    else:
        lines.append(
            f"candidate {prof['candidate_ms']:.4f} ms (spread {prof['spread']:.1%}), eager "
            f"{prof['eager_ms']:.4f} ms, torch.compile {prof['compile_ms']:.4f} ms: "
            f"{prof['speedup_vs_eager']:.2f}x vs eager, {prof['speedup_vs_compile']:.2f}x vs "
            f"compile, {prof['sol_fraction']:.0%} of speed of light"
        )
    lines += [f"  {v['code']}: {v['detail']}" for v in prof.get("violations", [])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
