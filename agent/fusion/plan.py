"""Partitions a Graph into kernels (docs/fusion.md, "Planning").

Walking the nodes in order, each one either joins the kernel that produces its latest input or
starts a new kernel:

- matmul-class nodes (linear, mm, matmul, bmm) start a `gemm` kernel; the pointwise nodes that
  follow over the same elements join it as its epilogue (bias, activation, scaling...);
- a reduction, softmax, log_softmax, layer_norm or rms_norm along the last dim(s) starts a
  `row_reduction` kernel over (rows, cols); a reduction or softmax along other dims (adjacent
  ones) starts an `axis_reduction` kernel over (outer, cols, inner), read in place, whose "rows"
  are its outer x inner outputs. Either takes over the pointwise group that produced its
  input (the prologue, e.g. x + residual); later pointwise nodes join it either per element
  ("elem": shape rows x cols, reading row scalars broadcast along the row, e.g. * weight + bias,
  or x - max(x) in a softmax written by hand) or per row ("row": one value a row, e.g. var + eps);
  further reductions over its elements join it too (two-pass layer_norm, softmax by hand);
- other pointwise nodes join the pointwise group of their input when the element count matches,
  else start a `pointwise` kernel; one that reads no kernel's value (inputs, parameters and
  constants alone) joins the last kernel when that is a pointwise group over as many elements;
- a scan (cumsum, cumprod; forward or reverse, inclusive or exclusive) along any dim is a `scan`
  kernel of its own over (rows, cols, inner), as an axis kernel's, and so is an argmax / argmin
  (an `arg_reduction`, int64 out); a max or avg pooling is a `pooling` kernel of its own over its
  output; nothing else joins these;
- a convolution (forward or transposed, 1-d to 3-d, grouped) starts a `convolution` kernel over
  its output, bias included; the pointwise nodes that follow over the same elements join it as
  its epilogue, as a GEMM's do (computed as the result leaves the library call: cuDNN's
  channels-last output is transposed back through it); reductions and the rest read its output
  from memory;
- `pick` (x's element at an int64 index along a dim: cross-entropy's target logit) is computed
  like a pointwise op, reading x where it lies in memory, so x comes from another kernel;
- `permute` (a transpose) is too: each element reads x at its permuted position, where x lies in
  memory (a GEMM's transposed operand is such a copy, made by the kernel before it), and so are
  `tril` / `triu` (x where it lies, zero across the diagonal), `cat` (each element reads the
  part its place along the dim falls in, at its place within that part) and `slice` (x at the
  sliced place: strided terms and an offset);
- reshape and identity are free: they alias the buffer of their input.

A node may join kernel K only when every other kernel it reads from comes earlier than K, so
running the kernels in creation order is always valid. A value is materialised (written to
memory) when a node of another kernel reads it, or it is a graph output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.fusion.expressions import BINARY, BOOL_OPS, POINTWISE_OPS, TERNARY
from agent.fusion.ir import Graph, Node, Ref, Term, broadcast_terms, is_identity, numel

REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "prod", "logsumexp"})
ROW_OPS = REDUCTIONS | {"softmax", "log_softmax", "layer_norm", "rms_norm"}
MATMULS = frozenset({"linear", "matmul", "mm", "bmm"})
REDUCING_KINDS = frozenset({"row_reduction", "axis_reduction"})
SCANS = frozenset({"cumsum", "cumprod"})
ARG_REDUCTIONS = frozenset({"argmax", "argmin"})  # the int64 index of the first max / min
POOLS = frozenset({"max_pool", "avg_pool"})
CONV = "conv"
# ops that are a kernel of their own, and its kind
STANDALONE = {"cumsum": "scan", "cumprod": "scan", "argmax": "arg_reduction",
              "argmin": "arg_reduction", "max_pool": "pooling", "avg_pool": "pooling",
              "conv": "convolution"}  # fmt: skip
LAYOUT = frozenset({"reshape", "identity"})
PICK = "pick"
PERMUTE = "permute"
CAT = "cat"
SLICE = "slice"
# ops computed per element from x where it lies in memory: x is never computed in their kernel
TRIANGLES = frozenset({"tril", "triu"})
# ops whose value is each element's position (torch.arange, torch.eye): no operand, computed
# inside every kernel that reads them, never read from memory
POSITION_OPS = frozenset({"arange", "eye"})
READ_IN_PLACE = frozenset({PICK, PERMUTE, CAT, SLICE}) | TRIANGLES
# The IR dtypes a kernel reads or writes besides float32: a pointwise op reads a bool as 0 or 1
# (x * mask), pick reads an int64 index, argmax / argmin write int64, reshape passes any through.
DTYPES = ("float32", "int64", "bool")
INT32_MAX = 2**31 - 1


class Unplaceable(Exception):
    """A node the planner cannot put in any kernel; the message says why."""


@dataclass(frozen=True)
class GemmShape:
    """C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]; `layout` says how each lies in memory,
    A then B: "n" as it is, "t" transposed (A as [batch, k, m], B as [batch, n, k]: an nn.Linear
    weight, or a matmul operand transposed_operands folded); a batch stride of 0 reuses one
    matrix for every batch."""

    batch: int
    m: int
    n: int
    k: int
    layout: str  # "nn" | "nt" | "tn" | "tt"
    stride_a: int
    stride_b: int
    a: Ref
    b: Ref
    bias: Ref | None


@dataclass
class Kernel:
    index: int
    kind: str  # pointwise | row_reduction | axis_reduction | gemm, or a STANDALONE kind
    nodes: list[str] = field(default_factory=list)  # computed here, in graph order
    aliases: list[str] = field(default_factory=list)  # reshape/identity of values computed here
    numel: int = 0  # elements of the element space
    rows: int = 0  # reducing kernels: the row space is rows x cols
    cols: int = 0
    inner: int = (
        1  # axis kernels: rows = outer x inner, element (o, c, i) at (o*cols + c)*inner + i
    )
    gemm: GemmShape | None = None
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"k{self.index}"


@dataclass
class Plan:
    graph: Graph
    kernels: list[Kernel]
    kernel_of: dict[str, int]
    level: dict[str, str]  # node -> "elem" | "row"
    alias_of: dict[str, Ref]  # reshape/identity node -> its input (not resolved)
    materialised: list[str]  # node names written to memory, in graph order
    unsupported: list[str]
    # masks of inputs and parameters alone, in no kernel: computed where they are read
    inline: frozenset[str] = frozenset()

    def resolve(self, ref: Ref) -> Ref:
        """The ref whose buffer `ref` shares (through reshape/identity chains)."""
        while ref.kind == "node" and ref.name in self.alias_of:
            ref = self.alias_of[ref.name]
        return ref


def _why(node: Node, reason: str) -> str:
    return f"{node.name} ({node.op}): {reason}"


# ---- geometry ----------------------------------------------------------------------------------


def row_geometry(graph: Graph, node: Node) -> tuple[int, int, int]:
    """(rows, cols, inner) of a row op: it reduces or normalises `cols` elements, `inner` apart,
    for each of `rows` outputs (rows = outer x inner; inner = 1: contiguous rows)."""
    if not node.args or not node.args[0].is_tensor:
        raise Unplaceable("its input is not a tensor")
    shape = graph.shape_of(node.args[0])
    rank = len(shape)
    total = numel(shape)
    if node.op in REDUCTIONS or node.op in ARG_REDUCTIONS:
        first, last = _reduced_block(shape, node.attrs.get("dim"))
    elif node.op in ("softmax", "log_softmax") or node.op in SCANS:
        if rank == 0:
            raise Unplaceable("softmax of a 0-d tensor")
        first = last = int(node.attrs.get("dim", -1)) % rank
    else:  # layer_norm, rms_norm
        normalized = list(node.attrs.get("normalized_shape") or [])
        if not normalized or list(shape[rank - len(normalized) :]) != normalized:
            raise Unplaceable(f"normalized_shape {normalized} is not the trailing dims of {shape}")
        first, last = rank - len(normalized), rank - 1
    cols = numel(shape[first : last + 1])
    inner = numel(shape[last + 1 :])
    if total == 0 or cols == 0:
        raise Unplaceable("zero-size tensors are not supported")
    rows = total // cols
    out = numel(node.shape)
    expected = rows if node.op in REDUCTIONS or node.op in ARG_REDUCTIONS else total
    if out != expected:
        raise Unplaceable(f"output shape {list(node.shape)} does not match its input {shape}")
    return rows, cols, inner


def _reduced_block(shape: tuple[int, ...], dims) -> tuple[int, int]:
    """The first and last dim of the block a reduction covers; size-1 dims count either way, so
    dims [1, 3] of [N, C, 1, W] are the block 1..3. Dims that leave a kept dim between them are
    not one block (not supported)."""
    rank = len(shape)
    if dims is None or dims == []:
        dims = list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    dims = sorted({int(d) % rank for d in dims}) if rank else []
    wide = [d for d in dims if shape[d] != 1]
    if not wide:  # nothing to reduce: each element is its own output
        return rank, rank - 1
    first, last = wide[0], wide[-1]
    kept = [d for d in range(first, last + 1) if d not in dims and shape[d] != 1]
    if kept:
        raise Unplaceable(
            f"reduces over dim(s) {dims} of {list(shape)}, which keeps dim(s) {kept} between "
            "them: only a block of adjacent reduced dims is supported"
        )
    return first, last


@dataclass(frozen=True)
class PoolShape:
    """A pooling over the trailing len(window) dims of x: `planes` = the product of the leading
    dims, each plane pooled on its own; per spatial dim the input and output sizes and the
    window's size, stride, padding and dilation."""

    planes: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    window: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]


def pool_geometry(graph: Graph, node: Node) -> PoolShape:
    if len(node.args) != 1 or not node.args[0].is_tensor:
        raise Unplaceable("pools one tensor")
    shape = graph.shape_of(node.args[0])
    window = tuple(int(k) for k in node.attrs.get("kernel_size") or ())
    spatial = len(window)
    attrs = [tuple(int(v) for v in node.attrs.get(key) or (default,) * spatial)
             for key, default in (("stride", 1), ("padding", 0), ("dilation", 1))]  # fmt: skip
    if not 1 <= spatial <= 3 or spatial >= len(shape) or any(len(a) != spatial for a in attrs):
        raise Unplaceable(f"a {spatial}-d window over {list(shape)}")
    stride, padding, dilation = attrs
    pool = PoolShape(numel(shape[:-spatial]), tuple(shape[-spatial:]),
                     tuple(node.shape[-spatial:]), window, stride, padding, dilation)  # fmt: skip
    if tuple(node.shape[:-spatial]) != tuple(shape[:-spatial]):
        raise Unplaceable(f"output {list(node.shape)} keeps other leading dims than {list(shape)}")
    for size, out, k, s, p, d in zip(pool.inputs, pool.outputs, window, stride, padding, dilation,
                                     strict=True):  # fmt: skip
        if min(k, s, d, out) < 1 or p < 0 or (out - 1) * s - p >= size or p * 2 > (k - 1) * d + 1:
            raise Unplaceable(f"a window of {k} (stride {s}, padding {p}, dilation {d}) gives "
                              f"{out} outputs from {size}")  # fmt: skip
    if node.op == "avg_pool" and any(d != 1 for d in dilation):
        raise Unplaceable("an average pooling with dilation")
    return pool


@dataclass(frozen=True)
class ConvShape:
    """x [batch, in_channels, *inputs] convolved (or, transposed, its adjoint) with weight
    [out_channels, in_channels / groups, *window] ([in_channels, out_channels / groups, *window]
    when transposed), per spatial dim the sizes, stride, padding and dilation."""

    batch: int
    in_channels: int
    out_channels: int
    groups: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    window: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    x: Ref
    weight: Ref
    bias: Ref | None


def conv_geometry(graph: Graph, node: Node) -> ConvShape:
    if len(node.args) != 3 or not node.args[0].is_tensor or not node.args[1].is_tensor:
        raise Unplaceable("convolves a tensor with a weight (and a bias or null)")
    x, weight, bias = node.args
    shape, w = graph.shape_of(x), graph.shape_of(weight)
    window = tuple(int(k) for k in node.attrs.get("kernel_size") or ())
    spatial, groups = len(window), int(node.attrs.get("groups", 1))
    attrs = [tuple(int(v) for v in node.attrs.get(key) or (default,) * spatial)
             for key, default in (("stride", 1), ("padding", 0), ("dilation", 1))]  # fmt: skip
    if not 1 <= spatial <= 3 or len(shape) != spatial + 2 or len(node.shape) != spatial + 2:
        raise Unplaceable(f"a {spatial}-d convolution of {list(shape)}")
    if any(len(a) != spatial for a in attrs) or tuple(w[2:]) != window or groups < 1:
        raise Unplaceable(f"a weight {list(w)} for a window of {list(window)}")
    transposed = bool(node.attrs.get("transposed", False))
    in_channels, out_channels = shape[1], node.shape[1]
    per_group = (
        (in_channels, out_channels // groups)
        if transposed
        else (out_channels, in_channels // groups)
    )
    if in_channels % groups or out_channels % groups or tuple(w[:2]) != per_group:
        raise Unplaceable(f"a weight {list(w)} for {in_channels} -> {out_channels} channels in "
                          f"{groups} groups")  # fmt: skip
    if bias.kind != "none" and tuple(graph.shape_of(bias)) != (out_channels,):
        raise Unplaceable(f"a bias {list(graph.shape_of(bias))} for {out_channels} channels")
    if node.shape[0] != shape[0]:
        raise Unplaceable(f"output {list(node.shape)} has another batch than {list(shape)}")
    stride, padding, dilation = attrs
    if min(stride + dilation + window) < 1 or min(padding) < 0:
        raise Unplaceable(
            f"stride {list(stride)}, padding {list(padding)}, dilation {list(dilation)}"
        )
    extra = tuple(int(v) for v in node.attrs.get("output_padding") or (0,) * spatial)
    for size, out, k, s, p, d, e in zip(shape[2:], node.shape[2:], window, stride, padding,
                                        dilation, extra, strict=True):  # fmt: skip
        span = d * (k - 1) + 1
        expected = (
            (size - 1) * s - 2 * p + span + e if transposed else (size + 2 * p - span) // s + 1
        )
        if out != expected or out < 1:
            raise Unplaceable(f"{out} outputs from {size} (window {k}, stride {s}, padding {p}, "
                              f"dilation {d}) where the convolution gives {expected}")  # fmt: skip
    return ConvShape(shape[0], in_channels, out_channels, groups, tuple(shape[2:]),
                     tuple(node.shape[2:]), window, stride, padding, dilation, transposed, x,
                     weight, None if bias.kind == "none" else bias)  # fmt: skip


def pick_geometry(graph: Graph, node: Node) -> tuple[int, int]:
    """(cols, inner) of pick(x, index, dim): x viewed as (outer, cols, inner), index and the
    output as (outer, inner)."""
    if len(node.args) != 2 or not all(a.is_tensor for a in node.args):
        raise Unplaceable("picks from a tensor with an index tensor")
    shape = graph.shape_of(node.args[0])
    if not shape:
        raise Unplaceable("picks from a 0-d tensor")
    dim = int(node.attrs.get("dim", 0)) % len(shape)
    if tuple(node.shape) != tuple(shape[:dim]) + tuple(shape[dim + 1 :]):
        raise Unplaceable(f"output {list(node.shape)} is not {list(shape)} without dim {dim}")
    if broadcast_terms(graph.shape_of(node.args[1]), node.shape) is None:
        raise Unplaceable(f"the index does not broadcast to {list(node.shape)}")
    return shape[dim], numel(shape[dim + 1 :])


def permutation(graph: Graph, node: Node) -> tuple[int, ...]:
    """permute(x)'s `dims`: dim k of the output is x's dim dims[k]."""
    if not node.args or not node.args[0].is_tensor:
        raise Unplaceable("its input is not a tensor")
    shape, dims = graph.shape_of(node.args[0]), node.attrs.get("dims")
    if not isinstance(dims, list) or sorted(dims) != list(range(len(shape))):
        raise Unplaceable(f"dims {dims!r} are not a permutation of {len(shape)} dims")
    if tuple(shape[d] for d in dims) != tuple(node.shape):
        raise Unplaceable(f"{list(shape)} permuted by {dims} is not {list(node.shape)}")
    return tuple(dims)


def cat_lengths(graph: Graph, node: Node) -> list[int]:
    """cat(parts, dim)'s parts' lengths along `dim`: each part the output's shape but there."""
    dim = node.attrs.get("dim")
    if not node.args or not all(ref.is_tensor for ref in node.args):
        raise Unplaceable("joins tensors alone")
    if not isinstance(dim, int) or not 0 <= dim < len(node.shape):
        raise Unplaceable(f"dim {dim!r} is not a dim of {list(node.shape)}")
    lengths = []
    for ref in node.args:
        shape = list(graph.shape_of(ref))
        if len(shape) != len(node.shape) or shape[:dim] + shape[dim + 1 :] != list(
            node.shape[:dim] + node.shape[dim + 1 :]
        ):
            raise Unplaceable(
                f"{ref.describe()} {shape} is not {list(node.shape)} but along dim {dim}"
            )
        lengths.append(shape[dim])
    if sum(lengths) != node.shape[dim]:
        raise Unplaceable(f"parts of {sum(lengths)} along dim {dim}, not {node.shape[dim]}")
    return lengths


def slice_terms(graph: Graph, node: Node) -> tuple[tuple[Term, ...], int]:
    """slice(x)'s read of x where it lies: index terms over the slice's flat index (one per dim
    of more than one element, x's stride times the step) and the offset of its first element."""
    x = node.args[0] if node.args else None
    if x is None or not x.is_tensor:
        raise Unplaceable("slices a tensor alone")
    shape, out = graph.shape_of(x), node.shape
    starts, steps = node.attrs.get("starts"), node.attrs.get("steps")
    if not (isinstance(starts, list) and isinstance(steps, list)) or not (
        len(starts) == len(steps) == len(shape) == len(out)
    ):
        raise Unplaceable(f"starts {starts} and steps {steps} are not one a dim of {list(shape)}")
    terms, offset = [], 0
    for d, (size, start, step, length) in enumerate(zip(shape, starts, steps, out, strict=True)):
        if not (step >= 1 and 0 <= start and (length == 0 or start + (length - 1) * step < size)):
            raise Unplaceable(f"dim {d}: {length} from {start} by {step} is not within {size}")
        stride = numel(shape[d + 1 :])
        offset += start * stride
        if length > 1:
            terms.append(Term(numel(out[d + 1 :]), length, step * stride))
    return tuple(terms), offset


def gemm_geometry(graph: Graph, node: Node) -> GemmShape:
    args = list(node.args) + [Ref("none")] * 3
    a, b = args[0], args[1]
    if not (a.is_tensor and b.is_tensor):
        raise Unplaceable("both operands must be tensors")
    sa, sb = graph.shape_of(a), graph.shape_of(b)
    bias = args[2] if node.op == "linear" and args[2].is_tensor else None
    if node.op == "linear":
        if len(sb) != 2 or not sa or sa[-1] != sb[1]:
            raise Unplaceable(f"linear of {list(sa)} with weight {list(sb)}")
        k, n = sb[1], sb[0]
        if bias is not None and broadcast_terms(graph.shape_of(bias), node.shape) is None:
            raise Unplaceable(f"bias {list(graph.shape_of(bias))} does not broadcast")
        g = GemmShape(1, numel(sa) // k if k else 0, n, k, "nt", 0, 0, a, b, bias)
    else:
        if len(sa) < 2 or len(sb) < 2:
            raise Unplaceable(
                f"operands {list(sa)} and {list(sb)}: 1-D matmul operands are not supported in v1"
            )
        if node.op in ("mm", "bmm") and not (len(sa) == len(sb) == (2 if node.op == "mm" else 3)):
            raise Unplaceable(f"operands {list(sa)} and {list(sb)}")
        trans_a, trans_b = bool(node.attrs.get("trans_a")), bool(node.attrs.get("trans_b"))
        sa, sb = _as_multiplied(sa, trans_a), _as_multiplied(sb, trans_b)
        layout = ("t" if trans_a else "n") + ("t" if trans_b else "n")
        m, k, n = sa[-2], sa[-1], sb[-1]
        if sb[-2] != k:
            raise Unplaceable(f"inner dims differ: {list(sa)} @ {list(sb)}")
        batch_a, batch_b = numel(sa[:-2]), numel(sb[:-2])
        out_batch = numel(node.shape[:-2])
        if batch_b == 1 and not (trans_a and batch_a > 1):
            # one B for every row of every batch: a single tall GEMM (A's rows one after another)
            g = GemmShape(1, numel(sa) // k if k else 0, n, k, layout, 0, 0, a, b, None)
        elif batch_a == out_batch and batch_b == out_batch and sa[:-2] == sb[:-2]:
            g = GemmShape(out_batch, m, n, k, layout, m * k, k * n, a, b, None)
        elif batch_a == 1 and batch_b == out_batch:
            g = GemmShape(out_batch, m, n, k, layout, 0, k * n, a, b, None)
        elif batch_b == 1 and batch_a == out_batch:  # a transposed A is no tall matrix
            g = GemmShape(out_batch, m, n, k, layout, m * k, 0, a, b, None)
        else:
            raise Unplaceable(
                f"batch dims of {list(sa)} @ {list(sb)} broadcast partially (not supported in v1)"
            )
    if numel(node.shape) != g.batch * g.m * g.n or g.m * g.n * g.k == 0:
        raise Unplaceable(f"output shape {list(node.shape)} or a zero-size operand")
    if max(g.m, g.n, g.k, g.batch) > INT32_MAX:
        raise Unplaceable("a GEMM dimension exceeds 2^31 - 1")
    return g


def _as_multiplied(shape: tuple[int, ...], transposed: bool) -> tuple[int, ...]:
    """An operand's shape as the product sees it: a transposed one's last two dims swapped."""
    if not transposed or len(shape) < 2:
        return tuple(shape)
    return (*shape[:-2], shape[-1], shape[-2])


# ---- checks ------------------------------------------------------------------------------------


def _output_dtype(graph: Graph, node: Node) -> str:
    if node.op in ARG_REDUCTIONS:
        return "int64"
    if node.op in BOOL_OPS:
        return "bool"
    if node.op in LAYOUT and node.args and node.args[0].is_tensor:
        return graph.dtype_of(node.args[0])
    if node.op in POSITION_OPS:
        return node.dtype  # as torch made it: an int64 arange, a bool eye
    return "float32"


def _operand_dtypes(node: Node, position: int) -> tuple[str, ...]:
    if node.op in POINTWISE_OPS:
        return ("float32", "bool")
    if node.op == PICK and position == 1:
        return ("int64",)
    if node.op in LAYOUT:
        return DTYPES
    return ("float32",)


def _check_dtypes(graph: Graph, node: Node) -> None:
    expected = _output_dtype(graph, node)
    if node.dtype != expected or expected not in DTYPES:
        raise Unplaceable(f"dtype {node.dtype}: this op makes {expected}")
    for position, ref in enumerate(node.args):
        dtype = graph.dtype_of(ref) if ref.is_tensor else "float32"
        allowed = _operand_dtypes(node, position)
        if node.op in POINTWISE_OPS and _of_positions(graph, ref):
            continue  # an int64 arange or eye: computed as the float it converts to, exactly
        if dtype not in allowed:
            raise Unplaceable(f"{ref.describe()} is {dtype}: this op reads {' or '.join(allowed)}")


def _of_positions(graph: Graph, ref: Ref) -> bool:
    """`ref` is an arange or eye, or a view of one (an int64 buffer of indices is not)."""
    while ref.kind == "node" and graph.node_by_name[ref.name].op in LAYOUT:
        ref = graph.node_by_name[ref.name].args[0]
    return ref.kind == "node" and graph.node_by_name[ref.name].op in POSITION_OPS


def _check_node(graph: Graph, node: Node) -> None:
    known = POINTWISE_OPS | ROW_OPS | set(STANDALONE) | MATMULS | LAYOUT | READ_IN_PLACE
    known |= POSITION_OPS
    if node.op not in known:
        raise Unplaceable("no kernel template for this op")
    _check_dtypes(graph, node)
    if numel(node.shape) == 0:
        raise Unplaceable("zero-size tensors are not supported")
    if node.op in LAYOUT:
        if not node.args or not node.args[0].is_tensor:
            raise Unplaceable("its input is not a tensor")
        if numel(graph.shape_of(node.args[0])) != numel(node.shape):
            raise Unplaceable("reshape changes the number of elements")
    elif node.op in POINTWISE_OPS:
        expected = 3 if node.op in TERNARY else 2 if node.op in BINARY else 1
        operands = [a for a in node.args if a.kind != "none"]
        if len(operands) != expected:
            raise Unplaceable(f"expects {expected} operand(s), got {len(operands)}")
        for ref in operands:
            if ref.is_tensor and broadcast_terms(graph.shape_of(ref), node.shape) is None:
                raise Unplaceable(
                    f"{ref.describe()} {list(graph.shape_of(ref))} does not broadcast to "
                    f"{list(node.shape)}"
                )
    elif node.op in POOLS:
        pool_geometry(graph, node)
    elif node.op == CONV:
        conv_geometry(graph, node)
    elif node.op == PICK:
        pick_geometry(graph, node)
    elif node.op == PERMUTE:
        permutation(graph, node)
    elif node.op == CAT:
        cat_lengths(graph, node)
    elif node.op == SLICE:
        slice_terms(graph, node)
    elif node.op in POSITION_OPS:
        if node.args or len(node.shape) != (1 if node.op == "arange" else 2):
            raise Unplaceable(
                f"{node.op} takes no operand and is {'1' if node.op == 'arange' else '2'}-d"
            )
    elif node.op in TRIANGLES:
        x = node.args[0] if node.args else None
        if len(node.shape) < 2 or x is None or not (x.is_tensor or x.kind == "const"):
            raise Unplaceable("keeps a triangle of a tensor (or a fill) of at least 2 dims")
        if x.is_tensor and tuple(graph.shape_of(x)) != tuple(node.shape):
            raise Unplaceable(f"{list(graph.shape_of(node.args[0]))} is not {list(node.shape)}")
        if not isinstance(node.attrs.get("diagonal", 0), int):
            raise Unplaceable(f"diagonal {node.attrs.get('diagonal')!r} is not an int")
    elif node.op in ROW_OPS or node.op in SCANS or node.op in ARG_REDUCTIONS:
        row_geometry(graph, node)
        if node.op in ("layer_norm", "rms_norm"):
            x_shape = graph.shape_of(node.args[0])
            for ref in node.args[1:]:
                if ref.kind == "const":
                    raise Unplaceable("a constant weight or bias")
                if ref.is_tensor and broadcast_terms(graph.shape_of(ref), x_shape) is None:
                    raise Unplaceable(f"{ref.describe()} does not broadcast to {list(x_shape)}")
    else:
        gemm_geometry(graph, node)


def _live(graph: Graph) -> set[str]:
    live: set[str] = set()
    stack = [r.name for r in graph.outputs if r.kind == "node"]
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        stack += [r.name for r in graph.node_by_name[name].args if r.kind == "node"]
    return live


# ---- the planner -------------------------------------------------------------------------------


def _row_scalar_terms(kernel: Kernel) -> tuple[Term, ...]:
    """How an element of a reducing kernel reads its row's value (output (o, i) of element
    (o, c, i)): the terms of [outer, 1, inner] broadcast over [outer, cols, inner]."""
    outer = kernel.rows // kernel.inner
    space = (outer, kernel.cols, kernel.inner)
    return broadcast_terms((outer, 1, kernel.inner), space)


class _Planner:
    def __init__(self, graph: Graph, inline: set[str] | None = None):
        self.graph = graph
        self.inline = inline or set()  # masks computed where read, in no kernel
        self.kernels: list[Kernel] = []
        self.kernel_of: dict[str, int] = {}
        self.level: dict[str, str] = {}
        self.alias_of: dict[str, Ref] = {}

    def resolve(self, ref: Ref) -> Ref:
        while ref.kind == "node" and ref.name in self.alias_of:
            ref = self.alias_of[ref.name]
        return ref

    def producers(self, node: Node) -> set[int]:
        return {
            self.kernel_of[r.name]
            for r in map(self.resolve, node.tensor_args())
            if r.kind == "node" and r.name in self.kernel_of
        }

    def new_kernel(self, kind: str, **extra) -> Kernel:
        kernel = Kernel(index=len(self.kernels), kind=kind, **extra)
        self.kernels.append(kernel)
        return kernel

    def join(self, kernel: Kernel, node: Node, level: str) -> None:
        kernel.nodes.append(node.name)
        self.kernel_of[node.name] = kernel.index
        self.level[node.name] = level

    def in_kernel_args(self, node: Node, kernel: Kernel) -> list[tuple[Ref, Ref]]:
        """(the arg as written, its resolved root) for args computed in `kernel`."""
        pairs = []
        for ref in node.tensor_args():
            root = self.resolve(ref)
            if root.kind == "node" and self.kernel_of.get(root.name) == kernel.index:
                pairs.append((ref, root))
        return pairs

    def pointwise_level(self, node: Node, kernel: Kernel) -> str | None:
        """The level at which `node` can be computed inside `kernel`, or None."""
        if kernel.kind in STANDALONE.values() and kernel.kind != "convolution":
            return None  # such a kernel is its op alone (a convolution takes an epilogue)
        total = numel(node.shape)
        inside = self.in_kernel_args(node, kernel)
        if node.op in READ_IN_PLACE and inside:  # it reads x where x lies in memory
            return None
        shape_of = self.graph.shape_of

        def fits(level: str) -> bool:
            for ref, root in inside:
                terms = broadcast_terms(shape_of(ref), node.shape)
                arg_level = self.level[root.name]
                if arg_level == level:
                    ok = is_identity(terms, total)
                elif level == "elem":  # a row scalar, read once for every element of its row
                    ok = terms == _row_scalar_terms(kernel)
                else:
                    ok = False
                if not ok:
                    return False
            return True

        if kernel.kind not in REDUCING_KINDS:
            return "elem" if total == kernel.numel and fits("elem") else None
        options = []
        if total == kernel.rows:
            options.append("row")
        if total == kernel.rows * kernel.cols:
            options.append("elem")
        for level in options:
            if fits(level):
                return level
        return None

    def place_row_op(self, node: Node, latest: Kernel | None) -> None:
        """Joins the kernel of its input when that one reduces the same way or is the pointwise
        group that produced it (the prologue), else starts a reducing kernel."""
        rows, cols, inner = row_geometry(self.graph, node)
        kind = "row_reduction" if inner == 1 else "axis_reduction"
        level = "row" if node.op in REDUCTIONS else "elem"
        x = self.resolve(node.args[0])
        home = self.kernels[self.kernel_of[x.name]] if x.kind == "node" else None
        if home is not None and home is latest and self.level[x.name] == "elem":
            if home.kind == kind and (home.rows, home.cols, home.inner) == (rows, cols, inner):
                self.join(home, node, level)
                return
            if home.kind == "pointwise" and home.numel == rows * cols:
                home.kind, home.rows, home.cols, home.inner = kind, rows, cols, inner
                self.join(home, node, level)
                return
        kernel = self.new_kernel(kind, numel=rows * cols, rows=rows, cols=cols, inner=inner)
        self.join(kernel, node, level)

    def place(self, node: Node) -> None:
        graph = self.graph
        if node.op in LAYOUT:
            root = self.resolve(node.args[0])
            inline = root.kind == "node" and root.name in self.inline
            # an arange or eye is read through its views where it is computed (they keep its
            # order); a mask's is not supported yet
            if inline and self.graph.node_by_name[root.name].op not in POSITION_OPS:
                raise Unplaceable(f"a reshape of the mask {root.name} is not supported yet")
            self.alias_of[node.name] = node.args[0]
            if root.kind == "node" and not inline:
                self.kernels[self.kernel_of[root.name]].aliases.append(node.name)
            return
        if node.name in self.inline:
            return
        producers = self.producers(node)
        latest = self.kernels[max(producers)] if producers else None
        if node.op in MATMULS:
            gemm = gemm_geometry(graph, node)
            kernel = self.new_kernel("gemm", numel=numel(node.shape), gemm=gemm)
            self.join(kernel, node, "elem")
            return
        if node.op in POOLS or node.op == CONV:
            kernel = self.new_kernel(STANDALONE[node.op], numel=numel(node.shape))
            self.join(kernel, node, "elem")
            return
        if node.op in STANDALONE:  # scans and arg reductions, along one axis
            rows, cols, inner = row_geometry(graph, node)
            kind = STANDALONE[node.op]
            kernel = self.new_kernel(kind, numel=rows * cols, rows=rows, cols=cols, inner=inner)
            self.join(kernel, node, "elem")
            return
        if node.op in ROW_OPS:
            self.place_row_op(node, latest)
            return
        if latest is None and self.kernels and self.kernels[-1].kind == "pointwise":
            # it reads no kernel's value, so it may run in any of them: the last pointwise
            # group, when over the same elements, rather than a kernel of its own that writes
            # its value for the group to read back (KernelBench's MinGPTNewGelu: 0.5 * x, then
            # x ** 3 ... read both, 40% of the speed of light in two kernels)
            latest = self.kernels[-1]
        if latest is not None:
            level = self.pointwise_level(node, latest)
            if level is not None:
                self.join(latest, node, level)
                return
        kernel = self.new_kernel("pointwise", numel=numel(node.shape))
        self.join(kernel, node, "elem")


def plan_graph(graph: Graph) -> Plan:
    """The kernels for `graph`, or a Plan whose `unsupported` says why there are none."""
    empty = Plan(graph, [], {}, {}, {}, [], [])
    if graph.unsupported:
        empty.unsupported = list(graph.unsupported)
        return empty
    live = _live(graph)
    problems = []
    for ref in graph.outputs:
        if ref.kind != "node":
            problems.append(f"output {ref.describe()}: an output must be computed by a node")
    if not graph.outputs:
        problems.append("the graph has no outputs")
    for node in graph.nodes:
        if node.name not in live:
            continue
        try:
            _check_node(graph, node)
        except Unplaceable as exc:
            problems.append(_why(node, str(exc)))
    planner = _Planner(graph)
    if not problems:
        problems = _place_all(planner, live)
    if not problems:
        # A mask of inputs and parameters that another kernel reads (minGPT's `self.bias == 0`
        # is smaller than what it masks) is recomputed by each op that reads it instead.
        masks = [n for n in _materialised(graph, planner, live) if _recomputable(planner, n)]
        if masks:
            # an output is written by a kernel, even where its readers recompute it
            returned = {planner.resolve(ref).name for ref in graph.outputs if ref.kind == "node"}
            planner = _Planner(graph, _with_operands(planner, masks) - returned)
            problems = _place_all(planner, live)
    for ref in graph.outputs:
        root = planner.resolve(ref) if ref.kind == "node" else ref
        if ref.kind == "node" and root.kind != "node" and not problems:
            problems.append(
                f"output {ref.name}: a reshape/identity of {root.describe()} computes nothing "
                "(no kernel to generate)"
            )
    if problems:
        empty.unsupported = problems
        return empty
    materialised = _materialised(graph, planner, live)
    kept_masks = [n for n in materialised if graph.node_by_name[n].dtype == "bool"]
    if kept_masks:
        empty.unsupported = [_why(graph.node_by_name[n], KEPT_MASK) for n in kept_masks]
        return empty
    kept_positions = [n for n in materialised if _position_valued(graph, graph.node_by_name[n])]
    if kept_positions:
        empty.unsupported = [_why(graph.node_by_name[n], KEPT_POSITIONS) for n in kept_positions]
        return empty
    for kernel in planner.kernels:
        kernel.name = f"k{kernel.index}_{_label(graph, kernel)}"
    return Plan(
        graph,
        planner.kernels,
        planner.kernel_of,
        planner.level,
        planner.alias_of,
        materialised,
        [],
        frozenset(planner.inline),
    )


def _place_all(planner: _Planner, live: set[str]) -> list[str]:
    problems = []
    for node in planner.graph.nodes:
        if node.name in live:
            try:
                planner.place(node)
            except Unplaceable as exc:
                problems.append(_why(node, str(exc)))
    return problems


def _recomputable(planner: _Planner, name: str, under_mask: bool = False) -> bool:
    """Whether node `name` can be computed inside any kernel that reads it: a mask, or a fill's
    triangle (`tril(ones(T, T))`), of inputs, parameters, constants and such nodes alone (a
    slice of an input or parameter is one: minGPT's `self.bias[:, :, :T, :T] == 0`); a value of
    positions (`_positional`)."""
    node = planner.graph.node_by_name[name]
    if _positional(planner, name):
        return True
    if node.op in TRIANGLES:
        return node.args[0].kind == "const"
    if node.op == SLICE:  # of an input or parameter, under a mask: read where it lies
        return under_mask and planner.resolve(node.args[0]).kind != "node"
    if node.op not in BOOL_OPS:
        return False
    roots = [planner.resolve(r) for r in node.tensor_args()]
    return all(r.kind != "node" or _recomputable(planner, r.name, True) for r in roots)


def _positional(planner: _Planner, name: str) -> bool:
    """An arange or eye, or a pointwise op of such nodes and numbers alone (a ramp of
    frequencies): computed from the element's position, reading no memory."""
    node = planner.graph.node_by_name[name]
    if node.op in POSITION_OPS:
        return True
    if node.op not in POINTWISE_OPS or not node.tensor_args():
        return False
    roots = [planner.resolve(r) for r in node.tensor_args()]
    return all(r.kind == "node" and _positional(planner, r.name) for r in roots)


def _with_operands(planner: _Planner, names: list[str]) -> set[str]:
    """`names` and the nodes they are computed from (recomputable too), all in no kernel."""
    inline, stack = set(), list(names)
    while stack:
        name = stack.pop()
        if name not in inline:
            inline.add(name)
            node = planner.graph.node_by_name[name]
            stack += [r.name for r in map(planner.resolve, node.tensor_args()) if r.kind == "node"]
    return inline


KEPT_MASK = (
    "a mask (a comparison's bool) lives in registers, read by pointwise ops of the kernel that "
    "computes it: returning it, or reading it in another kernel, is not supported yet"
)


KEPT_POSITIONS = (
    "an int64 arange or eye is computed as a float where it is read: returning it (or a "
    "pointwise op of it as int64) is not supported yet"
)


def _position_valued(graph: Graph, node: Node) -> bool:
    """An int64 value that kernels would have to write: an index fill's, not an arg reduction's."""
    return node.dtype == "int64" and node.op not in ARG_REDUCTIONS


def _materialised(graph: Graph, planner: _Planner, live: set[str]) -> list[str]:
    needed: set[str] = set()
    for ref in graph.outputs:
        needed.add(planner.resolve(ref).name)
    for node in graph.nodes:
        if node.name not in live or node.op in LAYOUT:
            continue
        if node.name in planner.inline:
            continue
        for ref in node.tensor_args():
            root = planner.resolve(ref)
            if root.kind != "node" or root.name in planner.inline:
                continue
            if planner.kernel_of[root.name] != planner.kernel_of[node.name]:
                needed.add(root.name)
    return [n.name for n in graph.nodes if n.name in needed]


def _label(graph: Graph, kernel: Kernel) -> str:
    if kernel.kind == "pointwise":
        return "pointwise"
    ops = [graph.node_by_name[n].op for n in kernel.nodes]
    if kernel.kind == "gemm" or kernel.kind in STANDALONE.values():
        return ops[0]
    return next(op for op in ops if op in ROW_OPS)
