"""The static gate: reads a candidate's sources before anything runs.

It backs up the runtime checks (which are the real defence) against the threats that are easiest
to see in source: torch compute called from C++ (threat 1), extra threads and streams (5), and
patching the harness's clocks or modules (6).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    code: str
    detail: str

    def to_dict(self) -> dict:
        return {"code": self.code, "detail": self.detail}


_FORBIDDEN_IMPORTS = {
    "threading": "async_work",
    "_thread": "async_work",
    "multiprocessing": "async_work",
    "concurrent": "async_work",
    "asyncio": "async_work",
    "subprocess": "forbidden_source",
    "socket": "forbidden_source",
    "ctypes": "forbidden_source",
    "gc": "forbidden_source",
    "inspect": "forbidden_source",
    "importlib": "forbidden_source",
    "builtins": "forbidden_source",
}
# Dotted names model_new.py may not mention: ways to reach torch compute, other streams, or the
# dispatch machinery the runtime check is built on.
_FORBIDDEN_NAMES = {
    "torch.cuda.Stream": "async_work",
    "torch.cuda.stream": "async_work",
    "torch.cuda.Event": "forbidden_source",
    "torch.compile": "torch_compute",
    "torch._dynamo": "torch_compute",
    "torch._inductor": "torch_compute",
    "torch.ops.aten": "torch_compute",
    "torch._C": "forbidden_source",
    "torch.utils._python_dispatch": "forbidden_source",
    "torch.overrides": "forbidden_source",
    "torch.backends": "forbidden_source",
    "sys.modules": "forbidden_source",
    "sys._getframe": "forbidden_source",
}

_CPP_ASYNC = re.compile(
    r"\b(std::thread|std::jthread|std::async|pthread_create|cudaStreamCreate\w*|"
    r"getStreamFromPool|cudaLaunchHostFunc)\b"
)
# A call through the torch/ATen namespaces: the last component is the function called.
_CPP_TORCH_CALL = re.compile(r"\b(?:torch|at)(?:::\w+)*::([a-z_]\w*)\s*\(")
_CPP_ALLOWED_CALLS = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "from_blob",
    "getCurrentCUDAStream",
    "getCurrentCUDABlasHandle",
    "getCurrentCUDABlasLtHandle",
    "getCurrentDeviceProperties",
    "getDeviceProperties",
    "getCudnnHandle",
    "device",
    "dtype",
    "elementSize",
    "toString",
}
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def check_python(source: str, filename: str = "model_new.py") -> list[Violation]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Violation("forbidden_source", f"{filename}:{exc.lineno}: syntax error: {exc.msg}")]
    found: list[Violation] = []
    for node in ast.walk(tree):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        for module in _imported_modules(node):
            code = _FORBIDDEN_IMPORTS.get(module.split(".")[0])
            if code:
                found.append(Violation(code, f"{where}: imports {module}"))
        names = _imported_modules(node)
        if isinstance(node, ast.Attribute) and _dotted_name(node):
            names.append(_dotted_name(node))
        for dotted in names:
            for name, code in _FORBIDDEN_NAMES.items():
                if dotted == name or dotted.startswith(name + "."):
                    found.append(Violation(code, f"{where}: uses {dotted}"))
        found += _patches(node, where)
    return list(dict.fromkeys(found))


def _imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def _dotted_name(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _patches(node: ast.AST, where: str) -> list[Violation]:
    """Assigning to another module's attribute (time.perf_counter = ...) or calling setattr."""
    targets = []
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    bad = [
        _dotted_name(t)
        for t in targets
        if isinstance(t, ast.Attribute)
        and _dotted_name(t)
        and not _dotted_name(t).startswith(("self.", "cls."))
    ]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id
        in (
            "setattr",
            "delattr",
            "exec",
            "eval",
            "__import__",
            "globals",
        )
    ):
        bad.append(f"{node.func.id}()")
    return [Violation("forbidden_source", f"{where}: patches or evaluates {b}") for b in bad]


def check_cpp(source: str, filename: str) -> list[Violation]:
    text = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), source)
    found: list[Violation] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{filename}:{lineno}"
        for match in _CPP_ASYNC.finditer(line):
            found.append(
                Violation(
                    "async_work",
                    f"{where}: {match.group(1)} (no extra threads "
                    "or streams: work must finish on the current stream)",
                )
            )
        for match in _CPP_TORCH_CALL.finditer(line):
            if match.group(1) not in _CPP_ALLOWED_CALLS:
                found.append(
                    Violation(
                        "torch_compute",
                        f"{where}: calls {match.group(0)[:-1]} "
                        "(only allocation is allowed from torch in C++)",
                    )
                )
    return found


def check_sources(sources: dict[str, str]) -> list[Violation]:
    """All violations in a candidate's files, by relative path."""
    found: list[Violation] = []
    for name, text in sorted(sources.items()):
        if name.endswith(".py"):
            found += check_python(text, name)
        else:
            found += check_cpp(text, name)
    return found
