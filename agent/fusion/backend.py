"""The fusion agent's policy: a Backend of the agent loop that needs no model.

It acts only through the tools, so its trace reads like an LLM's: inspect_graph (the harness
captures the op's graph in the sandbox), then write_file of the kernels the fusion compiler
generates, compile, verify (once more with TF32 off where a cuBLAS or cuDNN call had it on and
the kernels failed), profile; then it tunes the launch parameters of the kernels worth it with the
tune tool, every configuration a variant of model_new.py judged in one call (the fastest verified
candidate is the run's result whatever comes after); finish. An op it cannot compile ends the
run with the reason and no kernel.

The policy is a generator: each `yield` is a reply; what comes back is the tool results to it.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Generator

from agent.backends import Reply, TextSink, ToolCall, Usage
from agent.fusion.compiler import compile_graph
from agent.fusion.program import FusionProgram, KernelInfo
from agent.tools import NOT_THE_KERNELS
from agent.tune import MAX_VARIANTS

_SPEEDUP = re.compile(r"eager [^|(]*\((\d+(?:\.\d+)?)x\)")
_SPEEDUP_VS_COMPILE = re.compile(r"torch\.compile [^|(]*\((\d+(?:\.\d+)?)x\)")
_FASTEST = re.compile(r'fastest "([^"]+)"')
_LIGHT = re.compile(r"speed of light [^|(]*\((\d+)% of it\)")

# A launch configuration moves a kernel by a factor of two or so: one under a quarter of eager's
# speed (a direct convolution against cuDNN's, 31 ms to 1.8 ms on the H200) is its algorithm's
# loss, and tuning it would only spend the GPU lock (eight variants of that one took 4.5 minutes).
NOT_WORTH_TUNING = 0.25
# A kernel at 90% of the speed-of-light floor has at most a tenth left for any launch to win.
AT_SPEED_OF_LIGHT = 0.9
# A kernel's first tune call (its leading parameters, every combination) must beat the best so
# far by more than timing noise for its other parameters to be tried: on the H200 (level 1,
# session 43) a loss's reductions gained 0.2-1% from their first call and nothing from their
# second, while each variant held the GPU lock about 4 s.
LAUNCH_MATTERS = 1.03
# Kinds that do a program's heavy work in a library call (or a direct convolution), and kinds
# whose launch is a pointwise grid beside it: worth_tuning says why those are not tuned.
LIBRARY_KINDS = frozenset({"gemm", "convolution"})
POINTWISE_LAUNCHES = frozenset({"pointwise", "gemm"})
Results = list[dict]  # the tool messages that answered the previous reply
Policy = Generator[Reply, Results, None]


class FusionBackend:
    def __init__(self) -> None:
        self._policy: Policy | None = None
        self._calls = 0

    def complete(
        self,
        messages: list[dict],
        tools: list[dict],
        deadline: float | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        """The next step of the policy; it replies at once, so neither argument matters."""
        if self._policy is None:
            self._policy = self._run()
            return next(self._policy)
        try:
            return self._policy.send(_latest_results(messages))
        except StopIteration:  # finish was the last reply; the loop should have ended
            return self._reply("Done.", ("finish", {"summary": "done"}))

    # ---- the policy ----
    def _run(self) -> Policy:
        results = yield self._reply(
            "Capture the op's graph with shapes (the harness runs it in the sandbox).",
            ("inspect_graph", {}),
        )
        graph = _json(results[0]["content"]) if results and _ok(results[0]) else None
        if graph is None:
            yield self._finish(f"Could not capture the graph: {_first_line(results)}")
            return
        program = compile_graph(graph)
        if program.unsupported:
            reasons = "; ".join(program.unsupported)
            yield self._finish(f"The fusion compiler cannot handle this op: {reasons}")
            return
        writes = [("write_file", {"path": p, "content": t}) for p, t in program.files.items()]
        results = yield self._reply(program.summary(), *writes)
        if not all(_ok(r) for r in results):
            yield self._finish(f"Writing the kernels failed: {_first_line(results)}")
            return
        results = yield self._reply("Build the kernels.", ("compile", {}))
        if not _ok(results[0]):
            yield self._finish("The generated kernels did not compile (a fusion compiler bug).")
            return
        results = yield self._reply("Check them against the reference.", ("verify", {}))
        launch = program.launch
        if not _ok(results[0]) and _kernels_own(results[0]) and _uses_tf32(launch):
            launch = _without_tf32(launch)
            results = yield self._reply(
                "Check them again with TF32 off: its 10-bit mantissas may be what failed.",
                ("write_file", {"path": "model_new.py", "content": program.model_new(launch)}),
                ("verify", {}),
            )
            results = results[-1:]
        if not _ok(results[0]):
            yield self._finish(_verify_failure(results[0]))
            return
        results = yield self._reply("Time the default launch configuration.", ("profile", {}))
        first = results[0]
        versus_eager = _speedup(first) if _ok(first) else None
        if versus_eager is not None and versus_eager < NOT_WORTH_TUNING:
            yield self._finish(
                _outcome(_speedup(first, _SPEEDUP_VS_COMPILE))
                + f"Not tuned: at {versus_eager:.2f}x of eager, the kernel's algorithm is what "
                "loses, not its launch configuration."
            )
            return
        if not any(kernel.tunables for kernel in program.kernels):
            yield self._finish(
                _outcome(_speedup(first, _SPEEDUP_VS_COMPILE))
                + "Not tuned: no launch parameter changes these kernels (library calls alone)."
            )
            return
        tuned = worth_tuning(program)
        if not tuned:
            yield self._finish(
                _outcome(_speedup(first, _SPEEDUP_VS_COMPILE))
                + "Not tuned: beside a cuBLAS or cuDNN call, a pointwise launch is too small a "
                "share of the time to matter."
            )
            return
        light = _speedup(first, _LIGHT)
        if light is not None and light / 100 >= AT_SPEED_OF_LIGHT:
            yield self._finish(
                _outcome(_speedup(first, _SPEEDUP_VS_COMPILE))
                + f"Not tuned: at {light:.0f}% of the speed of light, no launch has much to win."
            )
            return
        best, versus_compile = yield from self._tune(program, tuned, launch, first)
        fused = f"Fused {len(program.kernels)} kernel(s); best launch: {_launch(best)}."
        yield self._finish(_outcome(versus_compile) + fused)

    def _tune(
        self, program: FusionProgram, kernels: list[KernelInfo], launch: dict, first: dict
    ) -> Generator:
        """The launch parameters of `kernels` through the tune tool, from `launch` and its
        profile `first`: every combination of a kernel's tunables in one call where they fit in it,
        else of as many parameters at a time as fit (the other kernels and parameters at their
        best so far); a kernel's later calls only when its first one beat the best so far by
        LAUNCH_MATTERS, and the next kernels only when this one's calls did. Returns the best
        launch found and its speedup over torch.compile."""
        best, best_speedup = copy.deepcopy(launch), _speedup(first) or 0.0
        versus_compile = _speedup(first, _SPEEDUP_VS_COMPILE) if _ok(first) else None
        for kernel in kernels:
            before = best_speedup
            calls = launch_groups(kernel.tunables, best[kernel.name])
            for number, group in enumerate(calls):
                if number and best_speedup < before * LAUNCH_MATTERS:
                    break  # its leading parameters moved it by less than noise: so will the rest
                trials = {}
                for values in group:
                    trial = copy.deepcopy(best)
                    trial[kernel.name].update(values)
                    trials[_launch({kernel.name: values})] = trial
                variants = [
                    {"name": name, "files": {"model_new.py": program.model_new(trial)}}
                    for name, trial in trials.items()
                ]
                results = yield self._reply(
                    f"Tune {kernel.name}: {len(variants)} launch configurations.",
                    ("tune", {"variants": variants}),
                )
                fastest = _FASTEST.search(results[0].get("content") or "")
                speedup = _speedup(results[0]) if _ok(results[0]) and fastest else None
                if speedup is not None and speedup > best_speedup:
                    best, best_speedup = trials[fastest.group(1)], speedup
                    versus_compile = _speedup(results[0], _SPEEDUP_VS_COMPILE)
            if calls and best_speedup < before * LAUNCH_MATTERS:
                break  # a kernel whose launches moved the program by less than noise: so will
                # the later ones' (level 1 on the H200, session 44: 99's four kernels took 36
                # variants, the first one's 9 would have found the same best within 0.3%)
        # Leave the workspace at the best configuration (already profiled: finish re-uses it).
        yield self._reply(
            f"Keep the fastest configuration ({best_speedup:.2f}x vs eager).",
            ("write_file", {"path": "model_new.py", "content": program.model_new(best)}),
        )
        return best, versus_compile

    # ---- replies ----
    def _reply(self, thought: str, *calls: tuple[str, dict]) -> Reply:
        tool_calls = []
        for name, arguments in calls:
            self._calls += 1
            raw = json.dumps(arguments)
            tool_calls.append(ToolCall(f"fusion_{self._calls}", name, raw, arguments))
        # No model, no tokens: the usage stays zero rather than an estimate.
        return Reply(content=thought, tool_calls=tool_calls, usage=Usage())

    def _finish(self, summary: str) -> Reply:
        return self._reply(summary, ("finish", {"summary": summary}))


def worth_tuning(program: FusionProgram) -> list[KernelInfo]:
    """The kernels whose launches the tune step tries, in order: those with tunables, but for
    pointwise launches (a pointwise kernel's, a GEMM's epilogue) beside a cuBLAS GEMM or a
    convolution, which does most of the work. On the H200 (level 2, session 51, fusion v5)
    tuning such a launch moved 22 runs by 0.0-2.1% for 11 variants, 20-50 s of the GPU lock
    each, while the row reductions and softmaxes beside them gained up to 1.8x."""
    heavy = any(kernel.kind in LIBRARY_KINDS for kernel in program.kernels)
    return [
        kernel
        for kernel in program.kernels
        if kernel.tunables and not (heavy and kernel.kind in POINTWISE_LAUNCHES)
    ]


def _uses_tf32(launch: dict) -> bool:
    return any(params.get("tf32") for params in launch.values())


def _without_tf32(launch: dict) -> dict:
    """`launch` with every cuBLAS and cuDNN call in strict fp32: under the loose tolerance a
    sum over many TF32 products can still miss where the exact result is near zero (level 2's
    14_Gemm_Divide_Sum_Scaling sums 8,192 GEMM outputs a row, H200, session 51)."""
    return {
        name: {**params, **({"tf32": 0} if "tf32" in params else {})}
        for name, params in launch.items()
    }


def launch_groups(tunables: dict[str, list[int]], current: dict[str, int]) -> list[list[dict]]:
    """The launches one kernel's tune calls try, as {param: value} each, never `current`: the
    parameters in order, packed into groups whose combinations fit in one call; each call tries
    every combination of its group's parameters (the others at their best by then)."""
    groups: list[list[str]] = [[]]
    size = 1
    for name, values in tunables.items():
        if groups[-1] and size * len(values) > MAX_VARIANTS:
            groups.append([])
            size = 1
        groups[-1].append(name)
        size *= len(values)
    calls = []
    for names in groups:
        values = [tunables[name][:MAX_VARIANTS] for name in names]
        launches = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
        launches = [x for x in launches if x != {name: current[name] for name in names}]
        if launches:
            calls.append(launches[:MAX_VARIANTS])
    return calls


def _launch(launch: dict) -> str:
    """{"k0": {"threads": 256}} as "k0 threads=256"."""
    return "; ".join(
        f"{kernel} " + " ".join(f"{k}={v}" for k, v in params.items())
        for kernel, params in launch.items()
    )


def _latest_results(messages: list[dict]) -> Results:
    """The tool messages after the last assistant message."""
    results: Results = []
    for message in reversed(messages):
        if message["role"] == "assistant":
            break
        if message["role"] == "tool":
            results.append(message)
    return results[::-1]


def _ok(result: dict) -> bool:
    text = result.get("content") or ""
    return not (text.startswith("Error") or ": FAILED" in text.split("\n", 1)[0])


def _json(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _speedup(result: dict, pattern: re.Pattern = _SPEEDUP) -> float | None:
    """The profile's speedup over eager (or over what `pattern` names)."""
    match = pattern.search(result.get("content") or "")
    return float(match.group(1)) if match else None


def _outcome(versus_compile: float | None) -> str:
    """A loss said as plainly as a win: the run's result is its fastest verified kernel, which
    may still be slower than torch.compile."""
    if versus_compile is None:
        return "Not compared with torch.compile: no profile gave its speedup. "
    if versus_compile < 1.0:
        return f"No faster kernel found: best {versus_compile:.2f}x of torch.compile. "
    return f"Faster than torch.compile: {versus_compile:.2f}x. "


def _kernels_own(result: dict) -> bool:
    """A failed judgement the kernels caused, not the harness or the machine."""
    text = result.get("content") or ""
    return not any(line in text for line in NOT_THE_KERNELS.values())


def _verify_failure(result: dict) -> str:
    """Only a failure that is the kernels' own is the fusion compiler's bug."""
    if _kernels_own(result):
        return "The generated kernels did not verify (a fusion compiler bug)."
    text = result.get("content") or ""
    line = next(line for line in NOT_THE_KERNELS.values() if line in text)
    return f"The harness could not judge the generated kernels. {line}"


def _first_line(results: Results) -> str:
    failed = next((r for r in results if not _ok(r)), results[0] if results else {})
    return (failed.get("content") or "no result").splitlines()[0][:300]
