"""The agent's tools: their JSON schemas (OpenAI tools format) and how each runs on a Workspace.

Results are written for a model to read: short, with the first compiler errors at file:line, a
one-line verdict, and a note wherever something was cut. The raw verdict travels beside the text
so the loop can record candidates and the trace can show everything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from agent import tune as tune_step
from agent.workspace import Workspace
from gpu_workers.harness.vocabulary import sources_digest

MAX_READ_LINES = 400
MAX_READ_CHARS = 16_000
MAX_LOG_CHARS = 4_000
MAX_ERROR_LINES = 8


def _schema(name: str, description: str, properties: dict, required: list[str]) -> dict:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


_PATH = {"type": "string", "description": "Workspace-relative path, e.g. kernels/relu.cpp"}

TOOLS: list[dict] = [
    _schema("list_files", "List every file in the workspace.", {}, []),
    _schema(
        "read_file",
        f"Read a workspace file, up to {MAX_READ_LINES} lines from start_line.",
        {"path": _PATH, "start_line": {"type": "integer", "description": "1-based, default 1"}},
        ["path"],
    ),
    _schema(
        "write_file",
        "Create or overwrite model_new.py or kernels/<name>.<ext>. Other files are read-only.",
        {"path": _PATH, "content": {"type": "string", "description": "The whole new file"}},
        ["path", "content"],
    ),
    _schema(
        "edit_file",
        "Replace one exact, unique occurrence of old_text with new_text in a writable file.",
        {"path": _PATH, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
        ["path", "old_text", "new_text"],
    ),
    _schema(
        "inspect_graph",
        "Capture the operator's computation graph with shapes (run in the sandbox): inputs, "
        "parameters, the core ops in order, outputs, and any op the fusion compiler cannot "
        "handle. Returns JSON.",
        {},
        [],
    ),
    _schema("compile", "Build binding.cpp and kernels/ into the kernel_ext module.", {}, []),
    _schema(
        "verify",
        "Compile if needed, then check ModelNew against Model on fresh inputs and the rules.",
        {},
        [],
    ),
    _schema(
        "profile",
        "Verify if needed, then time ModelNew against eager PyTorch, torch.compile and the "
        "speed-of-light floor. A candidate that passes is recorded; the fastest is the result.",
        {},
        [],
    ),
    _schema(
        "tune",
        "Profile several variants of the workspace in one call (launch parameters, block sizes, "
        "algorithms): each variant gives whole new texts for files the workspace has, judged "
        "like profile against the same baselines. Returns the variants ranked by time, those "
        "that failed with why; every verified one counts as a candidate, and the workspace is "
        f"left holding the fastest. At most {tune_step.MAX_VARIANTS} variants a call.",
        {
            "variants": {
                "type": "array",
                "description": 'e.g. [{"name": "threads=256", "files": {"model_new.py": "..."}}]',
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "files": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                    "required": ["files"],
                },
            }
        },
        ["variants"],
    ),
    _schema(
        "finish",
        "End the run. The current workspace is verified and profiled if it was not yet; the "
        "result is the fastest verified candidate of the whole run.",
        {"summary": {"type": "string", "description": "What you did, in a sentence or two"}},
        [],
    ),
]

TOOL_NAMES = [tool["function"]["name"] for tool in TOOLS]


class ToolCallError(Exception):
    """A call the tools cannot run (unknown name, missing or mistyped arguments): a format error."""


@dataclass
class ToolResult:
    text: str  # what the model reads
    ok: bool
    verdict: dict | None = None  # the harness's verdict (compile, verify, profile) or the graph
    # tune: each variant's (sources, verify verdict, profile verdict or None), for the loop to
    # record as candidates; the workspace holds only the fastest of them afterwards
    judged: list[tuple[dict, dict, dict | None]] = field(default_factory=list)


def check_arguments(name: str, arguments: dict) -> None:
    """Raises ToolCallError unless arguments fit the tool's schema (names and basic types)."""
    if name not in TOOL_NAMES:
        raise ToolCallError(f"unknown tool {name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    parameters = TOOLS[TOOL_NAMES.index(name)]["function"]["parameters"]
    missing = [key for key in parameters["required"] if key not in arguments]
    if missing:
        raise ToolCallError(f"{name} needs the argument(s): {', '.join(missing)}")
    for key, value in arguments.items():
        expected = parameters["properties"].get(key, {}).get("type")
        if expected is None:
            raise ToolCallError(f"{name} has no argument {key!r}")
        python_type = {"string": str, "integer": int, "array": list}[expected]
        if not isinstance(value, python_type) or isinstance(value, bool):
            article = "an" if expected[0] in "aeiou" else "a"
            raise ToolCallError(f"{name}: {key} must be {article} {expected}")


def run_tool(
    workspace: Workspace,
    name: str,
    arguments: dict,
    progress: Callable[[str], None] | None = None,
) -> ToolResult:
    """Runs one tool other than finish (the loop owns finish). Refusals become error results.
    `progress` hears a line as a long tool goes (tune: each variant judged)."""
    check_arguments(name, arguments)  # so `arguments` holds no key of ours, such as progress
    try:
        if name == "tune":
            return _tune(workspace, progress=progress, **arguments)
        return _RUNNERS[name](workspace, **arguments)
    except (ValueError, PermissionError, FileNotFoundError, IsADirectoryError) as error:
        return ToolResult(f"Error: {error}", ok=False)
    except UnicodeDecodeError:
        return ToolResult("Error: not a text file", ok=False)


def _list_files(workspace: Workspace) -> ToolResult:
    return ToolResult("\n".join(workspace.list_files()), ok=True)


def _read_file(workspace: Workspace, path: str, start_line: int = 1) -> ToolResult:
    lines = workspace.read_file(path).splitlines()
    start = max(start_line, 1)
    if start > max(len(lines), 1):
        return ToolResult(f"Error: {path} has only {len(lines)} lines", ok=False)
    shown = lines[start - 1 : start - 1 + MAX_READ_LINES]
    text = "\n".join(shown)
    if len(text) > MAX_READ_CHARS:
        text = text[:MAX_READ_CHARS]
        shown = text.splitlines()[:-1]  # the last line may be cut mid-way
        text = "\n".join(shown)
    end = start - 1 + len(shown)
    if end < len(lines):
        text += f"\n[lines {start}-{end} of {len(lines)}; read_file with start_line={end + 1}]"
    return ToolResult(text, ok=True)


def _write_file(workspace: Workspace, path: str, content: str) -> ToolResult:
    workspace.write_file(path, content)
    return ToolResult(f"Wrote {path} ({len(content.splitlines())} lines)", ok=True)


def _edit_file(workspace: Workspace, path: str, old_text: str, new_text: str) -> ToolResult:
    text = workspace.read_file(path)
    count = text.count(old_text) if old_text else 0
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times; include more context"
        return ToolResult(f"Error: old_text {where} in {path}; nothing changed", ok=False)
    workspace.write_file(path, text.replace(old_text, new_text, 1))
    return ToolResult(f"Edited {path}", ok=True)


def _inspect_graph(workspace: Workspace) -> ToolResult:
    capture = getattr(workspace, "graph", None)
    if not callable(capture):
        return ToolResult("Error: this workspace cannot capture the operator's graph", ok=False)
    graph = capture()
    return ToolResult(format_graph(graph), ok=not graph.get("unsupported"), verdict=graph)


def _compile(workspace: Workspace) -> ToolResult:
    verdict = workspace.compile()
    return ToolResult(summarise_compile(verdict), ok=bool(verdict.get("ok")), verdict=verdict)


def _verify(workspace: Workspace) -> ToolResult:
    # the sources it judged (the loop writes nothing while a tool runs): a bundle that
    # downloads is built only from sources of this digest (webapp/runs/bundle.py)
    verdict = {**workspace.verify(), "sources_digest": sources_digest(workspace.sources())}
    return ToolResult(summarise_verify(verdict), ok=bool(verdict.get("ok")), verdict=verdict)


def _profile(workspace: Workspace) -> ToolResult:
    verdict = {**workspace.profile(), "sources_digest": sources_digest(workspace.sources())}
    return ToolResult(summarise_profile(verdict), ok=bool(verdict.get("ok")), verdict=verdict)


def _tune(
    workspace: Workspace, variants: list, progress: Callable[[str], None] | None = None
) -> ToolResult:
    try:
        parsed = tune_step.parse_variants(variants, workspace.list_files())
    except tune_step.TuneError as error:
        return ToolResult(f"Error: {error}. Nothing was run.", ok=False)

    def judged(variant: tune_step.Variant, number: int) -> None:
        if progress:
            progress(tune_step.progress_line(variant, number, len(parsed)))

    ranked = tune_step.tune(workspace, parsed, on_judged=judged)
    return ToolResult(
        summarise_tune(ranked),
        ok=ranked[0].timed,
        verdict={"variants": [v.row() for v in ranked]},  # the whole verdicts are candidates'
        judged=[(v.sources, v.verify, v.profile) for v in parsed],  # in the order judged
    )


_RUNNERS: dict[str, Callable[..., ToolResult]] = {
    "list_files": _list_files,
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
    "inspect_graph": _inspect_graph,
    "compile": _compile,
    "verify": _verify,
    "profile": _profile,
    "tune": _tune,
}

# A workspace path inside an absolute build path, so that logs say kernels/x.cu:12, not /tmp/...
_ABSOLUTE_PREFIX = re.compile(r"(?:/[^\s:/()\"']+)+/(?=kernels/|model_new\.py|binding\.cpp)")
# gcc "kernels/a.cpp:7:5: error: ..." and nvcc "kernels/a.cu(7): error: ..."
_ERROR_AT_LOCATION = re.compile(
    r"[\w./-]+\.(?:cu|cuh|cpp|cc|h|hpp|py)(?::\d+|\(\d+\)).*?\berror\b", re.IGNORECASE
)


def format_graph(graph: dict) -> str:
    """The Graph IR as JSON a model reads easily: one line per input, parameter, node and
    output; json.loads gives the IR back."""
    lines = ["{"]
    keys = list(graph)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = graph[key]
        if isinstance(value, list) and value:
            items = [f"    {json.dumps(item)}" for item in value]
            lines.append(f"  {json.dumps(key)}: [")
            lines.append(",\n".join(items))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines)


def summarise_compile(verdict: dict) -> str:
    seconds = verdict.get("seconds") or 0.0
    if verdict.get("ok"):
        return f"compile: OK ({seconds:.1f} s{', cached' if verdict.get('cached') else ''})"
    return f"compile: FAILED ({seconds:.1f} s)\n{first_errors(verdict.get('log') or '')}"


def first_errors(log: str) -> str:
    """The first compiler errors with their file:line and two lines of context, else the tail."""
    lines = _ABSOLUTE_PREFIX.sub("", log).splitlines()
    errors = [i for i, line in enumerate(lines) if _is_located_error(line)]
    if not errors:
        return truncate_tail(log, MAX_LOG_CHARS)
    # Each error with the two lines after it (gcc's source line and caret), unless those are errors.
    context = {j for i in errors[:MAX_ERROR_LINES] for j in range(i + 1, min(i + 3, len(lines)))}
    shown = sorted(set(errors[:MAX_ERROR_LINES]) | (context - set(errors)))
    picked = [lines[j] for j in shown]
    note = f"\n[{len(errors)} errors in all; the first {MAX_ERROR_LINES} shown]"
    text = "\n".join(picked) + (note if len(errors) > MAX_ERROR_LINES else "")
    return truncate_head(text, MAX_LOG_CHARS)


def _is_located_error(line: str) -> bool:
    # Only the start of a line: build command lines run to kilobytes, and a regex over them is slow.
    return "error" in line.lower() and _ERROR_AT_LOCATION.search(line[:400]) is not None


# Said under a failed verify or profile that was not the kernel's doing (gpu_workers/harness/
# failure.py), so neither a model nor the fusion agent takes it for a bug in its code.
NOT_THE_KERNELS = {
    "problem": "Not the kernel's failure: the problem's own code failed.",
    "infrastructure": (
        "Not the kernel's failure: the machine failed (out of memory, a timeout or a disturbed "
        "host); the same step may pass when tried again."
    ),
}


def _whose(verdict: dict) -> list[str]:
    line = NOT_THE_KERNELS.get(verdict.get("failed_by") or "")
    return [line] if line else []


def summarise_verify(verdict: dict) -> str:
    errors = f"max_abs_err {_num(verdict.get('max_abs_err'))}, "
    errors += f"max_rel_err {_num(verdict.get('max_rel_err'))}"
    if verdict.get("ok"):
        return f"verify: PASSED ({verdict.get('trials', 0)} trials, {errors})"
    lines = [f"verify: FAILED ({errors})", *_violations(verdict)]
    if verdict.get("error"):
        lines.append(_error_text(verdict["error"]))
    return "\n".join(lines + _whose(verdict))


def summarise_profile(verdict: dict) -> str:
    if not verdict.get("ok"):
        lines = ["profile: FAILED", *_violations(verdict)]
        if verdict.get("error"):
            lines.append(_error_text(verdict["error"]))
        return "\n".join(lines + _whose(verdict))
    parts = [
        f"candidate {_ms(verdict.get('candidate_ms'))}",
        f"eager {_ms(verdict.get('eager_ms'))} ({_x(verdict.get('speedup_vs_eager'))})",
        f"torch.compile {_ms(verdict.get('compile_ms'))} ({_x(verdict.get('speedup_vs_compile'))})",
    ]
    if verdict.get("sol_ms") is not None:
        fraction = verdict.get("sol_fraction")
        share = f"{fraction:.0%} of it" if fraction is not None else "n/a"
        parts.append(f"speed of light {_ms(verdict['sol_ms'])} ({share})")
    if verdict.get("spread") is not None:  # said in words: "spread 0.321" meant nothing to people
        parts.append(f"spread {verdict['spread']:.1%} (interquartile range of its times / median)")
    return "profile: " + " | ".join(parts)


def summarise_tune(ranked: list[tune_step.Variant]) -> str:
    """The ranked table the agent reads; its first line names the fastest, parseably."""
    timed = [v for v in ranked if v.timed]
    if timed:
        best = timed[0].profile
        head = (
            f"tune: {len(timed)} of {len(ranked)} variants verified and timed; fastest "
            f'"{timed[0].name}": eager {_ms(best.get("eager_ms"))} '
            f"({_x(best.get('speedup_vs_eager'))}) | torch.compile "
            f"{_ms(best.get('compile_ms'))} ({_x(best.get('speedup_vs_compile'))}); the "
            "workspace now holds it"
        )
    else:
        head = f"tune: FAILED: none of {len(ranked)} variants verified; the workspace is unchanged"
    lines = [head, "rank | variant | ms | vs eager | vs torch.compile | of speed of light"]
    for place, variant in enumerate(ranked, start=1):
        v = variant.profile or {}
        if variant.timed:
            sol = v.get("sol_fraction")
            lines.append(
                f"{place} | {variant.name} | {_ms(v.get('candidate_ms'))} | "
                f"{_x(v.get('speedup_vs_eager'))} | {_x(v.get('speedup_vs_compile'))} | "
                f"{f'{sol:.0%}' if sol is not None else '-'}"
            )
        else:
            lines.append(f"- | {variant.name} | not timed: {variant.why()}")
    return "\n".join(lines)


def _error_text(error: str) -> str:
    """A verify or profile error: a compile log keeps its first errors, a traceback its end."""
    if error.startswith("compile failed"):
        return "compile failed:\n" + first_errors(error.partition(":")[2])
    return truncate_tail(error, MAX_LOG_CHARS)


def _violations(verdict: dict) -> list[str]:
    return [f"- {v.get('code')}: {v.get('detail')}" for v in verdict.get("violations") or []]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g} ms"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def truncate_head(text: str, limit: int) -> str:
    """Keeps the start: compiler errors cascade, so the first ones matter."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[{len(text) - limit} more characters cut]"


def truncate_tail(text: str, limit: int) -> str:
    """Keeps the end: a Python traceback ends with the exception that matters."""
    if len(text) <= limit:
        return text
    return f"[{len(text) - limit} earlier characters cut]\n" + text[-limit:]
