"""Imports point one way (docs/architecture.md, "Layers"): a module imports only from its own
layer or the layers below it, and no chain of imports comes back to where it started.

Read from the source with ast (every import, module-level or inside a function), so the test
needs none of the packages it checks to be importable.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("webapp", "agent", "gpu_workers")

# The harness's standard-library modules: the vocabulary every package may share.
SHARED_VOCABULARY = (
    "gpu_workers.harness.vocabulary",
    "gpu_workers.harness.problem_source",
    "gpu_workers.harness.build.workspace_paths",
    "gpu_workers.harness.synthesis",  # writes and reads problem sources, never runs them
)
# Top first; a module of a layer may import its own layer and any below.
WEB_LAYERS = (
    ("workers", ("gpu_workers",)),
    (
        "web entry points",
        ("webapp.api", "webapp.urls", "webapp.asgi", "webapp.wsgi", "webapp.serve"),
    ),
    ("leaderboard", ("webapp.leaderboard",)),
    ("suites", ("webapp.suites",)),
    ("runs", ("webapp.runs",)),
    ("problems", ("webapp.problems",)),
    ("accounts", ("webapp.accounts",)),
    ("web shared", ("webapp",)),
    ("vocabulary", SHARED_VOCABULARY),
)
# Besides their layers: what the agent, the harness and the apps may import of each other.
AGENT_CONFIG = ("agent.config",)
EXTRA_ALLOWED = {
    "webapp.runs": AGENT_CONFIG,
    "webapp.suites": AGENT_CONFIG,
    "webapp.leaderboard": AGENT_CONFIG,
    "agent.cli": ("gpu_workers.harness",),
    "agent.__main__": ("gpu_workers.harness",),
    "agent.train.episodes": ("gpu_workers.harness",),  # a rollout runs in a Session, as cli's
    # `grpo --rollouts-on`: the trainer sends rollouts to the site's run queues, as a manage.py
    # command joins the site (the only way in: the site's Celery app and its queue names)
    "agent.train.worker_rollouts": ("webapp.celery", "webapp.work_kinds"),
    "gpu_workers": ("agent",),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def imported(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The project's modules that the file at `path` (module `name`) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported(path, name, modules) for name, path in modules.items()}


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def web_layer(name: str) -> int | None:
    for rank, (_, prefixes) in enumerate(WEB_LAYERS):
        if within(name, prefixes) and not (rank == 0 and within(name, ("gpu_workers.harness",))):
            return rank
    return None


def allowed(source: str, target: str) -> bool:
    if within(target, SHARED_VOCABULARY):
        return True
    if any(within(source, (p,)) and within(target, t) for p, t in EXTRA_ALLOWED.items()):
        return True
    if within(source, ("agent",)) or within(target, ("agent",)):
        return within(source, ("agent",)) and within(target, ("agent",))
    if within(source, ("gpu_workers.harness",)) or within(target, ("gpu_workers.harness",)):
        return within(target, ("gpu_workers.harness",)) and not within(source, ("webapp",))
    source_rank, target_rank = web_layer(source), web_layer(target)
    return source_rank is not None and target_rank is not None and source_rank <= target_rank


def against_the_direction(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        for target in targets
        if not allowed(source, target)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def without_package_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ importing its own submodules is how a package exposes them, not a
    cycle: only edges between unrelated modules count."""
    return {
        source: {t for t in targets if not t.startswith(source + ".")}
        for source, targets in graph.items()
    }


def test_imports_follow_the_layers():
    assert against_the_direction(import_graph()) == []


def test_no_module_imports_itself_through_others():
    assert cycles(without_package_parents(import_graph())) == []


def test_the_shared_vocabulary_needs_only_the_standard_library():
    """The web process imports these: no torch, no package that is not Python's own."""
    outside = []
    for name, path in project_modules().items():
        if not within(name, SHARED_VOCABULARY):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            outside += [
                f"{name} imports {top}"
                for top in tops
                if top not in sys.stdlib_module_names and top not in ("__future__", "gpu_workers")
            ]
    assert outside == []


def test_a_wrong_way_import_and_a_cycle_are_seen():
    graph = {"webapp.problems.views": {"webapp.runs.models"}, "agent.loop": {"webapp.runs"}}
    assert against_the_direction(graph) == [
        "agent.loop imports webapp.runs",
        "webapp.problems.views imports webapp.runs.models",
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
