"""The Graph IR (`kernelarena.graph/1`, docs/fusion.md) as small frozen dataclasses, and the
broadcasting arithmetic every code generator shares.

Parsing checks the structure (references name something defined earlier, shapes are lists of
non-negative ints); whether an op can be compiled is the planner's business, not this module's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

FORMAT = "kernelarena.graph/1"


class IRError(ValueError):
    """The graph dict is malformed (not an op we cannot compile: a broken document)."""


@dataclass(frozen=True)
class Ref:
    """One `args` item: a graph input, a parameter or buffer, a node, a constant, or null."""

    kind: str  # "input" | "param" | "node" | "const" | "none"
    name: str = ""
    value: float = 0.0

    @property
    def is_tensor(self) -> bool:
        return self.kind in ("input", "param", "node")

    def describe(self) -> str:
        if self.kind == "const":
            return repr(self.value)
        if self.kind == "none":
            return "null"
        return f"{self.kind} {self.name}"


NONE = Ref("none")


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or a parameter/buffer."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "parameter" | "buffer"
    scalar: bool = False  # an input passed as a Python number: read by value, as a float


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    args: tuple[Ref, ...]
    attrs: dict = field(hash=False, compare=False)
    shape: tuple[int, ...] = ()
    dtype: str = "float32"

    def tensor_args(self) -> list[Ref]:
        return [a for a in self.args if a.is_tensor]


@dataclass
class Graph:
    device: str
    inputs: list[TensorSpec]
    params: list[TensorSpec]
    nodes: list[Node]
    outputs: list[Ref]
    unsupported: list[str]

    def __post_init__(self) -> None:
        self.input_by_name = {t.name: t for t in self.inputs}
        self.param_by_name = {t.name: t for t in self.params}
        self.node_by_name = {n.name: n for n in self.nodes}

    def shape_of(self, ref: Ref) -> tuple[int, ...]:
        if ref.kind == "input":
            return self.input_by_name[ref.name].shape
        if ref.kind == "param":
            return self.param_by_name[ref.name].shape
        if ref.kind == "node":
            return self.node_by_name[ref.name].shape
        return ()

    def dtype_of(self, ref: Ref) -> str:
        if ref.kind == "input":
            return self.input_by_name[ref.name].dtype
        if ref.kind == "param":
            return self.param_by_name[ref.name].dtype
        if ref.kind == "node":
            return self.node_by_name[ref.name].dtype
        return "float32"


def numel(shape) -> int:
    return math.prod(shape)


def _shape(value, where: str) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise IRError(f"{where}: shape must be a list of non-negative ints, got {value!r}")
    return tuple(value)


def _tensor_spec(item, kind: str, where: str) -> TensorSpec:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise IRError(f"{where}: expected an object with a name, got {item!r}")
    declared = item.get("kind", kind)
    return TensorSpec(
        name=item["name"],
        shape=_shape(item.get("shape"), f"{where} {item['name']}"),
        dtype=str(item.get("dtype", "float32")),
        kind=declared if declared in ("parameter", "buffer") else kind,
        scalar=bool(item.get("scalar", False)),
    )


def _ref(item, defined: dict[str, set[str]], where: str) -> Ref:
    if item is None:
        return NONE
    if not isinstance(item, dict) or len(item) != 1:
        raise IRError(f"{where}: a reference is one of input/param/node/const, got {item!r}")
    ((kind, value),) = item.items()
    if kind == "const":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise IRError(f"{where}: const must be a number, got {value!r}")
        return Ref("const", value=float(value))
    if kind not in ("input", "param", "node"):
        raise IRError(f"{where}: unknown reference kind {kind!r}")
    if value not in defined[kind]:
        raise IRError(f"{where}: {kind} {value!r} is not defined before its use")
    return Ref(kind, name=value)


def parse_graph(data: dict) -> Graph:
    """The IR dict (as inspect_graph returns it) as a Graph; raises IRError when malformed."""
    if not isinstance(data, dict):
        raise IRError(f"the graph must be a JSON object, got {type(data).__name__}")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise IRError(f"unknown graph format {fmt!r} (expected {FORMAT})")
    inputs = [_tensor_spec(t, "input", "inputs") for t in data.get("inputs") or []]
    params = [_tensor_spec(t, "parameter", "params") for t in data.get("params") or []]
    defined: dict[str, set[str]] = {
        "input": {t.name for t in inputs},
        "param": {t.name for t in params},
        "node": set(),
    }
    nodes = []
    for raw in data.get("nodes") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise IRError(f"nodes: expected an object with a name, got {raw!r}")
        name = raw["name"]
        if name in defined["node"]:
            raise IRError(f"node {name!r} is defined twice")
        where = f"node {name}"
        args = tuple(_ref(a, defined, where) for a in raw.get("args") or [])
        attrs = raw.get("attrs") or {}
        if not isinstance(attrs, dict):
            raise IRError(f"{where}: attrs must be an object")
        nodes.append(
            Node(
                name=name,
                op=str(raw.get("op")),
                args=args,
                attrs=dict(attrs),
                shape=_shape(raw.get("shape"), where),
                dtype=str(raw.get("dtype", "float32")),
            )
        )
        defined["node"].add(name)
    outputs = [_ref(o, defined, "outputs") for o in data.get("outputs") or []]
    unsupported = [str(u) for u in data.get("unsupported") or []]
    device = str(data.get("device", "cuda"))
    return Graph(device, inputs, params, nodes, outputs, unsupported)


# ---- broadcasting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One run of non-broadcast dims of an operand read in a bigger index space: the operand's
    element for flat index i of the space is sum over its terms of ((i // div) % mod) * mult."""

    div: int
    mod: int
    mult: int


def broadcast_terms(operand: tuple[int, ...], space: tuple[int, ...]) -> tuple[Term, ...] | None:
    """How a contiguous operand of shape `operand` is indexed from the flat (row-major) index of
    the broadcast space `space`; None when the shapes do not broadcast (PyTorch's rules).

    A full-size operand is one term (1, numel, 1): the index itself; a [C] parameter over
    [..., C] is (1, C, 1): i % C; [C, 1, 1] over [N, C, H, W] is (H*W, C, 1); a scalar has none.
    """
    if len(operand) > len(space):
        if any(d != 1 for d in operand[: len(operand) - len(space)]):
            return None
        operand = operand[len(operand) - len(space) :]
    padded = (1,) * (len(space) - len(operand)) + tuple(operand)
    if any(o not in (s, 1) for o, s in zip(padded, space, strict=True)):
        return None
    # Kept dims (operand follows the space) form runs between broadcast dims; size-1 space dims
    # contribute nothing either way.
    kept = [o == s and s != 1 for o, s in zip(padded, space, strict=True)]
    terms: list[Term] = []
    d = len(space)
    while d > 0:
        if not kept[d - 1]:
            d -= 1
            continue
        end = d
        while d > 0 and (kept[d - 1] or space[d - 1] == 1):
            d -= 1
        start = d
        mod = numel(space[start:end])
        div = numel(space[end:])
        mult = numel(padded[end:])
        terms.append(Term(div, mod, mult))
    return tuple(reversed(terms))


def permuted_terms(operand: tuple[int, ...], dims: tuple[int, ...]) -> tuple[Term, ...]:
    """How a contiguous operand of shape `operand` is read from the flat index of its permutation
    (dim k of the result is the operand's dim `dims[k]`): one term per result dim, each the
    operand's stride along it; runs that stay in order merge (a permutation that keeps the
    trailing dims reads them as one contiguous term)."""
    strides = [numel(operand[d + 1 :]) for d in range(len(operand))]
    result = [operand[d] for d in dims]
    terms: list[Term] = []
    for k in reversed(range(len(dims))):
        if result[k] == 1:
            continue
        term = Term(numel(result[k + 1 :]), result[k], strides[dims[k]])
        if terms and terms[-1].div * terms[-1].mod == term.div:
            inner = terms[-1]
            if inner.mult * inner.mod == term.mult:
                terms[-1] = Term(inner.div, inner.mod * term.mod, inner.mult)
                continue
        terms.append(term)
    return tuple(reversed(terms))


def is_identity(terms: tuple[Term, ...], total: int) -> bool:
    """The terms read the operand at the space's own flat index (a full-size operand)."""
    return total <= 1 and not terms or terms == (Term(1, total, 1),)


def _paren(expr: str) -> str:
    return expr if expr.isidentifier() else f"({expr})"


def flat_index(terms: tuple[Term, ...], total: int, index: str) -> str:
    """C++ for the operand's element index given the space's flat index expression `index`."""
    parts = []
    for t in terms:
        expr = index if t.div == 1 else f"{_paren(index)} / {t.div}"
        if t.div * t.mod < total:
            expr = f"{_paren(expr)} % {t.mod}"
        parts.append(expr if t.mult == 1 else f"{_paren(expr)} * {t.mult}")
    return " + ".join(parts) if parts else "0"


@dataclass(frozen=True)
class RowSplit:
    """An operand index split along rows of length C: row_base(r) + c * col (col is 0 or 1)."""

    row_terms: tuple[tuple[int, int, int], ...]  # (div over rows, mod, mult)
    col: int


def split_rows(terms: tuple[Term, ...], total: int, cols: int) -> RowSplit | None:
    """The terms as row part + column part for flat index r * cols + c, the column read with
    stride 0 or 1; None when a term mixes rows and columns (then the index is computed per
    element from the flat index)."""
    split = split_axis(terms, total, cols, 1)
    return split if split is not None and split.col in (0, 1) else None


def split_axis(terms: tuple[Term, ...], total: int, cols: int, inner: int) -> RowSplit | None:
    """The terms as row part + column part over the element space (outer, cols, inner): row r
    is (o, i) = (r // inner, r % inner), column c, flat index (o * cols + c) * inner + i. The
    column part is c * col; None when a term reads part of the column axis, or mixes it with
    the others in a way that does not split."""
    span = cols * inner
    if cols <= 0 or inner <= 0 or total % span:
        return None
    row_terms: list[tuple[int, int, int]] = []
    col = 0
    for t in terms:
        pieces = _cut(t, (inner, span))
        if pieces is None:
            return None
        for lo, hi, mult in pieces:  # digits [lo, hi) of the flat index, times mult
            if hi <= inner and inner % hi == 0:  # within i: the same digits of r
                row_terms.append((lo, hi // lo, mult))
            elif lo >= span and lo % span == 0:  # within o: r's digits are inner/span of them
                row_terms.append((lo // cols, hi // lo, mult))
            elif (lo, hi) == (inner, span) and not col:
                col = mult
            else:
                return None
    return RowSplit(tuple(row_terms), col)


def _cut(term: Term, bounds: tuple[int, ...]) -> list[tuple[int, int, int]] | None:
    """A term's digits [div, div * mod) cut at the boundaries it crosses, as (lo, hi, mult)
    pieces; None when a boundary falls inside one of its digits (no exact cut)."""
    pieces, lo, hi, mult = [], term.div, term.div * term.mod, term.mult
    for bound in bounds:
        if lo < bound < hi:
            if bound % lo or hi % bound:
                return None
            pieces.append((lo, bound, mult))
            mult, lo = mult * (bound // lo), bound
    pieces.append((lo, hi, mult))
    return pieces


def row_base(split: RowSplit, rows: int, row: str) -> str:
    """C++ for the row part of a split index, `row` being the row index expression."""
    parts = []
    for div, mod, mult in split.row_terms:
        expr = row if div == 1 else f"{_paren(row)} / {div}"
        if div * mod < rows:
            expr = f"{_paren(expr)} % {mod}"
        parts.append(expr if mult == 1 else f"{_paren(expr)} * {mult}")
    return " + ".join(parts) if parts else "0"
