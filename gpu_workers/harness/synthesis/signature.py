"""Signatures that say when two problems are the same, read from source text without running it.

Two per problem:
- `source_signature`: the syntax tree with docstrings, comments and layout gone and every name
  the file defines (classes, functions, arguments, variables, `self.` attributes, import aliases)
  renamed in order of first use. An exact or renamed copy has the same one.
- `op_signature`: the operators of `Model.forward` in the order they run: calls by their last
  name (`torch.relu`, `F.relu`, `x.relu()` are all "relu"), submodules by their constructor
  (`self.fc(x)` with `self.fc = nn.Linear(...)` is "linear"), arithmetic by its operator; layout
  calls (view, reshape, ...) left out. The same chain written another way, or at other sizes, has
  the same one.

A SignatureIndex holds a reference folder's and a suite's signatures and names the problem a
new source matches.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

CONTRACT = {"Model", "forward", "__init__", "get_inputs", "get_init_inputs", "self", "super"}
_LAYOUT_CALLS = {
    "view",
    "reshape",
    "contiguous",
    "size",
    "permute",
    "transpose",
    "unsqueeze",
    "squeeze",
    "expand",
    "float",
    "to",
    "clone",
    "flatten",
    "dim",
    "parameter",
}
_ALIASES = {"mm": "matmul", "bmm": "matmul", "multiply": "mul", "subtract": "sub"}
_OPERATORS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.MatMult: "matmul",
    ast.Pow: "pow",
    ast.USub: "neg",
}


class _Renamer(ast.NodeTransformer):
    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.modules: dict[str, str] = {}  # import alias -> module

    def _new(self, name: str) -> str:
        if name in CONTRACT or name in self.modules or hasattr(builtins, name):
            return self.modules.get(name, name)
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Import(self, node: ast.Import) -> ast.AST:
        for alias in node.names:
            self.modules[alias.asname or alias.name.split(".")[0]] = alias.name
            alias.asname = None
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        for alias in node.names:
            self.modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            alias.asname = None
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._new(node.arg)
        node.annotation = None
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self._new(node.attr)
        self.generic_visit(node)
        return node

    def _defined(self, node):
        node.name = self._new(node.name)
        _drop_docstring(node)
        node.decorator_list = []
        if hasattr(node, "returns"):
            node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_ClassDef = _defined


def _drop_docstring(node) -> None:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def source_signature(source: str) -> str:
    tree = ast.parse(source)
    _drop_docstring(tree)
    tree = _Renamer().visit(tree)
    return _digest(ast.dump(tree, annotate_fields=False, include_attributes=False))


def _op_name(name: str) -> str:
    name = name.lower().replace("_", "")
    for suffix in ("1d", "2d", "3d"):
        name = name.removesuffix(suffix)
    return _ALIASES.get(name, name)


def _dotted_last(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _model(tree: ast.Module) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    return found[0] if found else None


def _submodules(model: ast.ClassDef) -> dict[str, str]:
    """self.<attr> -> the op its constructor makes, from every method's `self.x = Ctor(...)`."""
    made = {}
    for node in ast.walk(model):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            ctor = _dotted_last(node.value.func)
            for target in node.targets:
                if isinstance(target, ast.Attribute) and ctor:
                    made[target.attr] = _op_name(ctor)
    return made


class _Ops(ast.NodeVisitor):
    def __init__(self, submodules: dict[str, str]) -> None:
        self.submodules = submodules
        self.ops: list[str] = []

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)  # arguments run first
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            name = self.submodules.get(func.attr, func.attr)
        else:
            name = _dotted_last(func)
        if name and _op_name(name) not in _LAYOUT_CALLS and name not in ("super", "len"):
            self.ops.append(_op_name(name))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.generic_visit(node)
        self.ops.append(_OPERATORS.get(type(node.op), type(node.op).__name__.lower()))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        self.generic_visit(node)
        if type(node.op) in _OPERATORS and not isinstance(node.operand, ast.Constant):
            self.ops.append(_OPERATORS[type(node.op)])


def op_sequence(source: str) -> tuple[str, ...]:
    """The operators of Model.forward in the order they run (empty when there is no Model)."""
    model = _model(ast.parse(source))
    if model is None:
        return ()
    forward = [n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    if not forward:
        return ()
    visitor = _Ops(_submodules(model))
    for statement in forward[0].body:
        visitor.visit(statement)
    return tuple(visitor.ops)


def op_signature(source: str) -> str:
    ops = op_sequence(source)
    return _digest(" ".join(ops)) if ops else ""


@dataclass
class Match:
    name: str  # the problem it matches, e.g. "reference level1/19_ReLU.py"
    how: str  # "the same source" or "the same operators (relu, sum)"

    def reason(self) -> str:
        return f"{self.how} as {self.name}"


@dataclass
class SignatureIndex:
    sources: dict[str, str] = field(default_factory=dict)
    ops: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # files that could not be read or parsed

    def add(self, name: str, source: str) -> None:
        """Keeps the first name of each signature. Raises SyntaxError where ast cannot read it."""
        self.sources.setdefault(source_signature(source), name)
        signature = op_signature(source)
        if signature:
            self.ops.setdefault(signature, name)

    def match(self, source: str) -> Match | None:
        name = self.sources.get(source_signature(source))
        if name is not None:
            return Match(name, "the same source")
        name = self.ops.get(op_signature(source))
        if name is not None:
            return Match(name, f"the same operators ({', '.join(op_sequence(source))})")
        return None

    def add_folder(self, folder: Path | str, label: str = "reference") -> int:
        """Every *.py under `folder` (KernelBench keeps levels in subfolders); returns how many
        were read."""
        folder = Path(folder)
        read = 0
        for path in sorted(folder.rglob("*.py")):
            try:
                self.add(f"{label} {path.relative_to(folder)}", path.read_text())
                read += 1
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                self.skipped.append(str(path.relative_to(folder)))
        return read
