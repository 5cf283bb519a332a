"""A planned kernel's arithmetic as a small expression DAG (the kernel body), which both code
generators walk.

Every IR node of a kernel lowers to body nodes: loads of buffers computed elsewhere (with the
broadcast index terms of the node that reads them; a pick's load indexed by an int64 buffer
too), constants, pointwise ops (expressions.py),
reductions along the row (sum, max, min, prod) and, in a GEMM's epilogue, the accumulator. Row ops
lower to their textbook passes: softmax = max, then sum of exp(x - max), then exp(x - max) / sum;
layer_norm = mean, then the mean of squared deviations (two-pass), then the normalised row.

Each body node has a level: "elem" (one value per element of the kernel's element space) or
"row" (one value per row), and a depth: how many reductions must finish before it is known. A
row kernel makes one sweep over each row per depth, then a final sweep writing element outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.fusion import expressions
from agent.fusion.ir import Ref, Term, broadcast_terms, flat_index, numel, permuted_terms
from agent.fusion.plan import (
    POSITION_OPS,
    Kernel,
    Plan,
    permutation,
    pick_geometry,
    slice_terms,
)
from agent.fusion.program import Param

FLOAT32_EPS = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps: rms_norm's eps=None
PLAIN_REDUCTIONS = {"sum": "sum", "amax": "max", "amin": "min", "prod": "prod"}  # IR op -> reduce


@dataclass(frozen=True)
class PickIndex:
    """A pick's load: x read as (outer, cols, inner) at (o, index[o, i], i), for the flat position
    o * inner + i of the pick's output; the int64 index buffer read through its terms."""

    buffer: str
    terms: tuple[Term, ...]
    cols: int
    inner: int


@dataclass(frozen=True)
class Triangle:
    """A load kept only on one side of a diagonal of its last two dims (tril / triu): element
    (..., row, col) of a [..., rows, cols] space is read where col - row <= diagonal (lower) or
    col - row >= diagonal (upper), else it is 0."""

    rows: int
    cols: int
    diagonal: int
    upper: bool
    fill: float | None = None  # no buffer: a fill's triangle (tril(ones(T, T))), this where kept


@dataclass(frozen=True)
class Piece:
    """A load of one part of a cat: in the cat's space, element (outer, along, inner) of
    [..., size, inner] is read from the part where `start <= along < start + length`, at
    (outer, along - start, inner) of the part's [..., length, inner]; else it is 0 (the cat is
    the sum of its pieces, each element in exactly one)."""

    inner: int
    size: int
    start: int
    length: int


@dataclass(frozen=True)
class Window:
    """A slice's load: the element's place in the slice's own space (`total` elements) read from
    the sliced buffer through `terms` (its strides times the steps) plus `offset` (the first
    element's place), one element at a time (strides may break float4 alignment)."""

    terms: tuple[Term, ...]
    total: int
    offset: int


@dataclass(frozen=True)
class Position:
    """A load with no buffer whose value comes from the element's position in its own space
    (an IR arange or eye): arange, start + step * index; eye over [rows, cols], 1 where the
    row is the column, else 0."""

    op: str  # "arange" | "eye"
    start: float = 0.0
    step: float = 1.0
    cols: int = 1


@dataclass
class BNode:
    id: int
    kind: str  # "load" | "const" | "scalar" | "op" | "reduce" | "acc"
    level: str  # "elem" | "row"
    depth: int = 0
    op: str = ""  # op: an expressions.py op; reduce: "sum" | "max" | "min"
    attrs: dict = field(default_factory=dict)
    args: tuple[int, ...] = ()
    buffer: str = ""  # load: the buffer's C name
    terms: tuple[Term, ...] = ()  # load: index terms over a space of `total` elements
    total: int = 0
    dtype: str = "float32"  # load: the buffer's IR dtype (a bool mask is read as 0.0 or 1.0)
    pick: PickIndex | None = None  # load: read at a position an index buffer holds
    triangle: Triangle | None = None  # load: zero on the other side of a diagonal
    position: Position | None = None  # load: the value is where the element lies (no buffer)
    piece: Piece | None = None  # load: one part of a cat, 0 outside it
    window: Window | None = None  # load: a slice of the buffer
    value: float = 0.0  # const (a scalar's value is its parameter, named by `buffer`)

    @property
    def indexed(self) -> bool:
        """A load known only per element (a pick's position, a triangle's mask, an arange's or
        eye's value): it never splits along rows."""
        special = (self.pick, self.triangle, self.position, self.piece, self.window)
        return any(field is not None for field in special)


@dataclass(frozen=True)
class Output:
    node: str  # the IR node written
    bnode: int
    buffer: str
    level: str


@dataclass
class Body:
    """The expression DAG of one kernel, in creation (topological) order."""

    kernel: Kernel
    nodes: list[BNode] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    value_of: dict[str, int] = field(default_factory=dict)  # IR node -> body node
    accumulator: str = ""  # the work buffer a library call wrote its result to, if any
    _memo: dict = field(default_factory=dict)

    def _add(self, key, **fields) -> int:
        if key is not None and key in self._memo:
            return self._memo[key]
        node = BNode(id=len(self.nodes), **fields)
        self.nodes.append(node)
        if key is not None:
            self._memo[key] = node.id
        return node.id

    def const(self, value: float, level: str) -> int:
        return self._add(("const", float(value), level), kind="const", level=level, value=value)

    def scalar(self, name: str, level: str) -> int:
        """A number passed to the launcher by value (a Python number input)."""
        return self._add(("scalar", name, level), kind="scalar", level=level, buffer=name)

    def load(
        self,
        buffer: str,
        terms: tuple[Term, ...],
        total: int,
        level: str,
        dtype: str = "float32",
        pick: PickIndex | None = None,
        triangle: Triangle | None = None,
        position: Position | None = None,
        piece: Piece | None = None,
        window: Window | None = None,
    ) -> int:
        key = ("load", buffer, terms, total, level, pick, triangle, position, piece, window)
        fields = dict(buffer=buffer, terms=terms, total=total, dtype=dtype, pick=pick)
        fields.update(triangle=triangle, position=position, piece=piece, window=window)
        return self._add(key, kind="load", level=level, **fields)

    def acc(self) -> int:
        return self._add(("acc",), kind="acc", level="elem")

    def op(self, op: str, args: list[int], level: str, attrs: dict | None = None) -> int:
        depth = max((self.nodes[a].depth for a in args), default=0)
        return self._add(
            None, kind="op", level=level, depth=depth, op=op, attrs=attrs or {}, args=tuple(args)
        )

    def reduce(self, op: str, arg: int) -> int:
        depth = self.nodes[arg].depth + 1
        return self._add(None, kind="reduce", level="row", depth=depth, op=op, args=(arg,))

    # ---- queries the generators use ----
    def loads(self, level: str) -> list[BNode]:
        return [n for n in self.nodes if n.kind == "load" and n.level == level]

    def reductions(self) -> list[BNode]:
        return [n for n in self.nodes if n.kind == "reduce"]

    @property
    def sweeps(self) -> int:
        """Passes over each row that compute reductions (depth d reductions in sweep d - 1)."""
        return max((n.depth for n in self.reductions()), default=0)

    def closure(self, targets: list[int]) -> list[BNode]:
        """The element-level nodes `targets` need, in order (row-level values are inputs)."""
        seen: set[int] = set()
        stack = list(targets)
        while stack:
            i = stack.pop()
            node = self.nodes[i]
            if i in seen or node.level != "elem":
                continue
            seen.add(i)
            stack += list(node.args)
        return [n for n in self.nodes if n.id in seen]

    def row_closure(self, targets: list[int]) -> list[BNode]:
        """Row-level nodes (not reductions' inputs) that `targets` need."""
        seen: set[int] = set()
        stack = list(targets)
        while stack:
            i = stack.pop()
            node = self.nodes[i]
            if i in seen:
                continue
            seen.add(i)
            if node.kind != "reduce":
                stack += list(node.args)
        return [n for n in self.nodes if n.id in seen and n.level == "row"]

    def _read_dtypes(self) -> dict[str, str]:
        read: dict[str, str] = {}
        for n in self.nodes:
            if n.kind == "load" and n.buffer:  # a fill's triangle reads no buffer
                read.setdefault(n.buffer, n.dtype)
                if n.pick is not None:
                    read.setdefault(n.pick.buffer, "int64")
        return read

    def writes(self) -> list[str]:
        """The buffers the kernel writes, each once, in output order."""
        return list(dict.fromkeys(o.buffer for o in self.outputs))

    def params(self) -> list[Param]:
        """The launcher's parameters: the buffers read, the numbers passed by value, then the
        buffers written (float32)."""
        reads = [Param(b, "in", dtype) for b, dtype in self._read_dtypes().items()]
        numbers = dict.fromkeys(n.buffer for n in self.nodes if n.kind == "scalar")
        return (
            reads + [Param(b, "scalar") for b in numbers] + [Param(b, "out") for b in self.writes()]
        )

    def elem_outputs(self) -> list[Output]:
        return [o for o in self.outputs if o.level == "elem"]

    def row_outputs(self) -> list[Output]:
        return [o for o in self.outputs if o.level == "row"]


def fixed_operand(node: BNode) -> str | None:
    """How a kernel names a value fixed for the whole launch: a const's literal, a scalar's
    parameter; None for any other node."""
    if node.kind == "const":
        return expressions.literal(node.value)
    if node.kind == "scalar":
        return node.buffer
    return None


def load_expression(node: BNode, position: str) -> str:
    """C++ (both dialects) reading load `node` at flat position `position` of its space."""
    if node.position is not None:
        p = node.position
        own = flat_index(node.terms, node.total, position)  # its place in the fill's own space
        if p.op == "eye":
            return f"(({own}) / {p.cols} == ({own}) % {p.cols} ? 1.0f : 0.0f)"
        start, step = expressions.literal(p.start), expressions.literal(p.step)
        return f"({start} + {step} * (float)({own}))"
    if node.piece is not None:
        return _piece_expression(node, flat_index(node.terms, node.total, position))
    if node.triangle is not None:
        t = node.triangle
        own = flat_index(node.terms, node.total, position)  # its place in the triangle's space
        col = f"(long long)(({own}) % {t.cols})"
        row = f"(long long)(({own}) / {t.cols} % {t.rows})"
        kept = f"{col} - {row} {'>=' if t.upper else '<='} {t.diagonal}"
        value = f"{node.buffer}[{own}]" if t.fill is None else expressions.literal(t.fill)
        return f"({kept} ? {value} : 0.0f)"
    if node.window is not None:
        w = node.window
        own = flat_index(node.terms, node.total, position)  # its place in the slice's space
        shift = f" + {w.offset}" if w.offset else ""
        return f"{node.buffer}[{flat_index(w.terms, w.total, own)}{shift}]"
    if node.pick is None:
        return f"{node.buffer}[{flat_index(node.terms, node.total, position)}]"
    pick = node.pick
    index = f"{pick.buffer}[{flat_index(pick.terms, node.total, position)}]"
    # An index out of [0, cols) (torch raises) is clamped: the kernel never reads out of bounds.
    last = pick.cols - 1
    column = f"({index} < 0 ? 0 : {index} > {last} ? {last} : {index})"
    if pick.inner == 1:
        return f"{node.buffer}[({position}) * {pick.cols} + {column}]"
    inner, span = pick.inner, pick.cols * pick.inner
    start = f"({position}) / {inner} * {span} + ({position}) % {inner}"
    return f"{node.buffer}[{start} + {column} * {inner}]"


def _piece_expression(node: BNode, own: str) -> str:
    """A cat's part read at `own`, the element's flat place in the cat's space, or 0 outside it."""
    c = node.piece
    place = f"({own})" if c.inner == 1 else f"({own}) / {c.inner}"
    along = f"(long long)({place} % {c.size})"
    outer = f"(long long)(({own}) / {c.size * c.inner})"
    within = f"({along} - {c.start})" if c.start else along
    index = f"{outer} * {c.length * c.inner} + {within}"
    if c.inner > 1:
        index = f"{index} * {c.inner} + ({own}) % {c.inner}"
    bounds = [f"{along} >= {c.start}"] if c.start else []
    if c.start + c.length < c.size:
        bounds.append(f"{along} < {c.start + c.length}")
    value = f"{node.buffer}[{index}]"
    return f"({' && '.join(bounds)} ? {value} : 0.0f)" if bounds else value


def epilogue_lines(body: Body, value: str, index: str, dialect: str, indent: str) -> list[str]:
    """One element of a library kernel's epilogue: every output of `body` (whose accumulator is
    an `acc` node or a load of the kernel's work buffer, `accumulator`) computed from `value`, the
    accumulator at flat position `index`, and stored there. Loads are one per element: for a
    convolution's direct loop and its channels-last write-back, where the convolution itself
    dominates."""
    closure = body.closure([o.bnode for o in body.outputs])

    def ref(i: int) -> str:
        node = body.nodes[i]
        return fixed_operand(node) or (f"a{i}" if node.kind in ("load", "acc") else f"e{i}")

    lines = []
    for n in closure:
        if n.kind == "acc" or (
            n.kind == "load" and body.accumulator and n.buffer == body.accumulator
        ):
            lines.append(f"{indent}const float a{n.id} = {value};")
        elif n.kind == "load":
            lines.append(f"{indent}const float a{n.id} = {load_expression(n, index)};")
    lines += expressions.statements(closure, ref, indent, dialect)
    lines += [f"{indent}{o.buffer}[{index}] = {ref(o.bnode)};" for o in body.outputs]
    return lines


def row_passes(body: Body) -> list[tuple[str, list[BNode], list[int]]]:
    """The sweeps over each row: ("reduce", element nodes computed, reduction nodes) per
    reduction depth, then ("write", element nodes computed, output nodes) if any."""
    passes = []
    for d in range(body.sweeps):
        reds = [n.id for n in body.reductions() if n.depth == d + 1]
        targets = [body.nodes[r].args[0] for r in reds]
        passes.append(("reduce", body.closure(targets), reds))
    outs = body.elem_outputs()
    if outs:
        passes.append(("write", body.closure([o.bnode for o in outs]), [o.bnode for o in outs]))
    return passes


def buffer_name(ref: Ref, names: dict[tuple[str, str], str]) -> str:
    return names[(ref.kind, ref.name)]


def standalone_operands(
    plan: Plan, kernel: Kernel, names: dict[tuple[str, str], str]
) -> tuple[str, str]:
    """The buffers a kernel of one node (a STANDALONE op: scan, arg reduction, pooling) reads and
    writes; its output is always materialised."""
    node = plan.graph.node_by_name[kernel.nodes[0]]
    return buffer_name(plan.resolve(node.args[0]), names), names[("node", node.name)]


def conv_operands(
    plan: Plan, kernel: Kernel, names: dict[tuple[str, str], str]
) -> tuple[str, str, str | None, str]:
    """The buffers a convolution kernel reads (x, weight, bias or None) and writes."""
    node = plan.graph.node_by_name[kernel.nodes[0]]
    x, weight, bias = (plan.resolve(ref) for ref in node.args)
    bias_name = None if bias.kind == "none" else buffer_name(bias, names)
    return (buffer_name(x, names), buffer_name(weight, names), bias_name,
            names[("node", node.name)])  # fmt: skip


def conv_params(x: str, w: str, b: str | None, epilogue: list[Param]) -> list[Param]:
    """A convolution kernel's launcher parameters: x, the weight and the bias, then what its
    epilogue reads (those three aside) and writes."""
    own = [x, w, *([b] if b else [])]
    return [Param(t, "in") for t in own] + [p for p in epilogue if p.buffer not in own]


def described_epilogue(kernel: Kernel) -> str:
    """How a library kernel's description names the pointwise nodes fused after it."""
    after = kernel.nodes[1:]
    return f", then its epilogue ({', '.join(after)}) on each output" if after else ""


def gemm_operands(plan: Plan, kernel: Kernel, names: dict[tuple[str, str], str]) -> tuple[str, str]:
    """The buffers of a GEMM kernel's A and B (through reshape/identity aliases)."""
    g = kernel.gemm
    return buffer_name(plan.resolve(g.a), names), buffer_name(plan.resolve(g.b), names)


class _Lowering:
    def __init__(self, plan: Plan, kernel: Kernel, names: dict, acc_buffer: str | None):
        self.plan = plan
        self.graph = plan.graph
        self.kernel = kernel
        self.names = names
        self.acc_buffer = acc_buffer
        self.body = Body(kernel)
        self.scalars = {t.name for t in plan.graph.inputs if t.scalar}

    def arg(self, ref: Ref, consumer_shape: tuple[int, ...], level: str) -> int:
        body = self.body
        if ref.kind == "const":
            return body.const(ref.value, level)
        root = self.plan.resolve(ref)
        if root.kind == "input" and root.name in self.scalars:
            return body.scalar(buffer_name(root, self.names), level)
        if root.kind == "node" and root.name in body.value_of:
            return body.value_of[root.name]
        if root.kind == "node" and root.name in self.plan.inline:  # a mask, computed here
            mask = self.graph.node_by_name[root.name]
            if mask.op in POSITION_OPS:  # read through the views between (they keep its order)
                return self.position(mask, level, self.graph.shape_of(ref), consumer_shape)
            if mask.op in ("tril", "triu"):
                return self.triangle(mask, level, consumer_shape)
            if mask.op == "slice":  # of an input or parameter, read by a mask computed here
                return self.sliced(mask, level, consumer_shape)
            operands = [self.arg(a, consumer_shape, level) for a in mask.args if a.kind != "none"]
            return body.op(mask.op, operands, level, mask.attrs)
        terms = broadcast_terms(self.graph.shape_of(ref), consumer_shape)
        assert terms is not None, f"{ref} does not broadcast to {consumer_shape}"
        buffer = buffer_name(root, self.names)
        dtype = self.graph.dtype_of(root)
        return body.load(buffer, terms, numel(consumer_shape), level, dtype)

    def lower(self, name: str) -> int:
        node = self.graph.node_by_name[name]
        level = self.plan.level[name]
        body = self.body
        if node.op in ("linear", "matmul", "mm", "bmm"):
            value = self.accumulator(node)
            gemm = self.kernel.gemm
            if gemm.bias is not None:
                bias = self.arg(gemm.bias, node.shape, "elem")
                value = body.op("add", [value, bias], "elem")
            else:
                value = body.op("identity", [value], "elem")
            return value
        if node.op == "conv":  # its library call (or direct loop) adds the bias itself
            return body.op("identity", [self.accumulator(node)], "elem")
        if node.op in expressions.POINTWISE_OPS:
            args = [self.arg(a, node.shape, level) for a in node.args if a.kind != "none"]
            return body.op(node.op, args, level, node.attrs)
        if node.op == "pick":
            return self.pick(node, level)
        if node.op == "permute":
            return self.permute(node, level)
        if node.op == "cat":
            return self.cat(node, level)
        if node.op == "slice":
            return self.sliced(node, level, node.shape)
        if node.op in ("tril", "triu"):
            return self.triangle(node, level)
        if node.op in POSITION_OPS:
            return self.position(node, level, node.shape, node.shape)
        return self.lower_row_op(node)

    def position(self, node, level: str, shape: tuple[int, ...], space: tuple[int, ...]) -> int:
        """An arange or eye (`node`), seen as `shape` (itself, or a view of it), read in `space`."""
        cols = node.shape[-1] if node.op == "eye" else 1
        start, step = float(node.attrs.get("start", 0.0)), float(node.attrs.get("step", 1.0))
        kept = Position(node.op, start, step, cols)
        terms = broadcast_terms(shape, space)
        assert terms is not None, f"{node.name} {shape} does not broadcast to {space}"
        return self.body.load("", terms, numel(space), level, position=kept)

    def accumulator(self, node) -> int:
        """A library kernel's result (a GEMM's product, a convolution's output): in registers,
        or in the work buffer the library call wrote."""
        if self.acc_buffer is None:
            return self.body.acc()
        total = numel(node.shape)
        return self.body.load(self.acc_buffer, (Term(1, total, 1),), total, "elem")

    def triangle(self, node, level: str, consumer_shape: tuple[int, ...] | None = None) -> int:
        """x where it lies in memory (or a fill's value), zero on the other side of the
        diagonal; a fill's triangle may be read by a consumer it broadcasts to."""
        space = consumer_shape or node.shape
        x = self.plan.resolve(node.args[0])
        fill = float(x.value) if x.kind == "const" else None
        rows, cols = node.shape[-2:]
        diagonal = int(node.attrs.get("diagonal", 0))
        kept = Triangle(rows, cols, diagonal, node.op == "triu", fill)
        terms = broadcast_terms(node.shape, space)
        buffer = "" if fill is not None else buffer_name(x, self.names)
        return self.body.load(buffer, terms, numel(space), level, triangle=kept)

    def permute(self, node, level: str) -> int:
        """x read at each element's permuted position, where x lies in memory."""
        x_ref = node.args[0]
        terms = permuted_terms(self.graph.shape_of(x_ref), permutation(self.graph, node))
        x = self.plan.resolve(x_ref)
        dtype = self.graph.dtype_of(x)
        total = numel(node.shape)
        return self.body.load(buffer_name(x, self.names), terms, total, level, dtype)

    def cat(self, node, level: str) -> int:
        """Each part read where it lies, kept where the element falls in it: the sum of pieces."""
        dim = node.attrs["dim"]
        inner, size, total = numel(node.shape[dim + 1 :]), node.shape[dim], numel(node.shape)
        value, start = None, 0
        for ref in node.args:
            length = self.graph.shape_of(ref)[dim]
            if length:  # an empty part holds no element
                piece = Piece(inner, size, start, length)
                buffer = buffer_name(self.plan.resolve(ref), self.names)
                load = self.body.load(buffer, (Term(1, total, 1),), total, level, piece=piece)
                value = load if value is None else self.body.op("add", [value, load], level)
            start += length
        return value

    def sliced(self, node, level: str, space: tuple[int, ...]) -> int:
        """A slice (`node`) read where its operand lies, in `space` (its own, or one it
        broadcasts to)."""
        terms, offset = slice_terms(self.graph, node)
        window = Window(terms, numel(node.shape), offset)
        seen = broadcast_terms(node.shape, space)
        assert seen is not None, f"{node.name} {node.shape} does not broadcast to {space}"
        x = buffer_name(self.plan.resolve(node.args[0]), self.names)
        return self.body.load(x, seen, numel(space), level, window=window)

    def pick(self, node, level: str) -> int:
        x, index = (self.plan.resolve(a) for a in node.args)
        cols, inner = pick_geometry(self.graph, node)
        terms = broadcast_terms(self.graph.shape_of(node.args[1]), node.shape)
        pick = PickIndex(buffer_name(index, self.names), terms, cols, inner)
        total = numel(node.shape)
        return self.body.load(buffer_name(x, self.names), (), total, level, pick=pick)

    def lower_row_op(self, node) -> int:
        body = self.body
        cols = self.kernel.cols
        x_ref = node.args[0]
        x_shape = self.graph.shape_of(x_ref)
        x = self.arg(x_ref, x_shape, "elem")
        op = node.op
        if op in PLAIN_REDUCTIONS:
            red = body.reduce(PLAIN_REDUCTIONS[op], x)
            return body.op("identity", [red], "row")
        if op == "mean":
            total = body.reduce("sum", x)
            return body.op("div", [total, body.const(cols, "row")], "row")
        if op == "logsumexp":  # max + log(sum(exp(x - max))): no overflow
            top = body.reduce("max", x)
            e = body.op("exp", [body.op("sub", [x, top], "elem")], "elem")
            log_total = body.op("log", [body.reduce("sum", e)], "row")
            return body.op("add", [log_total, top], "row")
        if op in ("softmax", "log_softmax"):
            top = body.reduce("max", x)
            shifted = body.op("sub", [x, top], "elem")
            e = body.op("exp", [shifted], "elem")
            total = body.reduce("sum", e)
            if op == "softmax":
                return body.op("div", [e, total], "elem")
            log_total = body.op("log", [total], "row")
            return body.op("sub", [shifted, log_total], "elem")
        eps = node.attrs.get("eps")
        if eps is None:
            eps = 1e-5 if op == "layer_norm" else FLOAT32_EPS
        cols_c = body.const(cols, "row")
        if op == "layer_norm":
            mean = body.op("div", [body.reduce("sum", x), cols_c], "row")
            dev = body.op("sub", [x, mean], "elem")
            square = body.op("mul", [dev, dev], "elem")
            var = body.op("div", [body.reduce("sum", square), cols_c], "row")
            rstd = body.op("rsqrt", [body.op("add", [var, body.const(eps, "row")], "row")], "row")
            value = body.op("mul", [dev, rstd], "elem")
            extras = list(node.args[1:3])
        else:  # rms_norm
            square = body.op("mul", [x, x], "elem")
            ms = body.op("div", [body.reduce("sum", square), cols_c], "row")
            rstd = body.op("rsqrt", [body.op("add", [ms, body.const(eps, "row")], "row")], "row")
            value = body.op("mul", [x, rstd], "elem")
            extras = list(node.args[1:2])
        for ref, combine in zip(extras, ("mul", "add"), strict=False):
            if ref.is_tensor:
                value = body.op(combine, [value, self.arg(ref, x_shape, "elem")], "elem")
        return value


def lower_kernel(
    plan: Plan, kernel: Kernel, names: dict[tuple[str, str], str], acc_buffer: str | None = None
) -> Body:
    """The body of `kernel`. `names` maps (ref kind, name) to buffer C names; `acc_buffer` names
    the buffer a GEMM wrote its product to (CUDA), None where the accumulator is in registers."""
    lowering = _Lowering(plan, kernel, names, acc_buffer)
    body = lowering.body
    body.accumulator = acc_buffer or ""
    for name in kernel.nodes:
        body.value_of[name] = lowering.lower(name)
    materialised = set(plan.materialised)
    for name in kernel.nodes:
        if name in materialised:
            bnode = body.value_of[name]
            buffer = names[("node", name)]
            body.outputs.append(Output(name, bnode, buffer, body.nodes[bnode].level))
    return body
