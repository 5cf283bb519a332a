"""A reduction over dims that keep a dim between them (mean over [0, 2, 3] of NCHW) as a chain of
reductions over blocks of adjacent dims, which the planner's row and axis kernels take: the last
block first (keepdim, so the other dims keep their places), then the rest together.

A reduction of few long rows (a whole-tensor mean: one row) is split in two stages the same way:
the rows as [rows, parts, length], reduced over the length, then over the parts. A kernel makes
one team per row, so one row would use one multiprocessor of the GPU (one thread on cpu).

Every reduction of the IR composes so: sum, prod, amax, amin and logsumexp of a part are reduced
again as themselves, and a mean of equal-sized means is the mean.

A layer_norm or rms_norm of few long rows (KernelBench's LayerNorm: 16 rows of 4 M elements) is
first written as those composable reductions and pointwise ops, two-pass as the row kernel
computes it (the mean, then the mean of squared deviations; rms_norm: the mean of squares), so
its reductions split as above: x is read three times (twice for rms_norm) by kernels that fill
the GPU, instead of once per pass by one multiprocessor a row.
"""

from __future__ import annotations

import math
from dataclasses import replace

from agent.fusion.body import FLOAT32_EPS
from agent.fusion.ir import Graph, Node, Ref

COMPOSABLE = frozenset({"sum", "mean", "amax", "amin", "prod", "logsumexp"})
NORMS = frozenset({"layer_norm", "rms_norm"})
FEW_ROWS = 128  # fewer outputs than this leave most of a GPU idle
MIN_PART = 512  # elements a part keeps, so the first stage still streams long rows
MAX_PARTS = 4096  # rows of the first stage, all the parts of all the rows


def split_reductions(graph: Graph) -> Graph:
    """`graph` with every reduction over separated blocks of dims split into a chain, and every
    reduction of few long rows into two stages."""
    graph = _rewrite(graph, _norm_in_steps, NORMS)
    return _rewrite(_rewrite(graph, _chain, COMPOSABLE), _stages, COMPOSABLE)


def _rewrite(graph: Graph, split, ops: frozenset[str]) -> Graph:
    nodes: list[Node] = []
    for node in graph.nodes:
        nodes += split(graph, node) if node.op in ops else [node]
    if len(nodes) == len(graph.nodes):
        return graph
    return Graph(graph.device, graph.inputs, graph.params, nodes, graph.outputs, graph.unsupported)


def _chain(graph: Graph, node: Node) -> list[Node]:
    if not node.args or not node.args[0].is_tensor:
        return [node]
    shape = list(graph.shape_of(node.args[0]))
    blocks = _blocks(shape, node.attrs.get("dim"))
    if len(blocks) < 2:
        return [node]
    chain, source = [], node.args[0]
    for k, block in enumerate(reversed(blocks[1:])):  # the first block is the last link's
        shape = [1 if d in block else s for d, s in enumerate(shape)]
        attrs = {"dim": block, "keepdim": True}
        part = Node(f"{node.name}.part{k}", node.op, (source,), attrs, tuple(shape), node.dtype)
        chain.append(part)
        source = Ref("node", name=part.name)
    # The last link reduces the node's own dims: the parts' are size 1 by now.
    return [*chain, replace(node, args=(source, *node.args[1:]))]


def _blocks(shape: list[int], dims) -> list[list[int]]:
    """The reduced dims of size > 1 as runs that no kept dim of size > 1 interrupts."""
    rank = len(shape)
    if dims is None or dims == []:
        return [list(range(rank))] if rank else []
    dims = sorted({int(d) % rank for d in ([dims] if isinstance(dims, int) else dims)})
    blocks: list[list[int]] = []
    for d in range(rank):
        if d in dims and shape[d] != 1:
            if blocks and blocks[-1][-1] == _previous_wide(shape, dims, d):
                blocks[-1].append(d)
            else:
                blocks.append([d])
    return blocks


def _previous_wide(shape: list[int], dims: list[int], d: int) -> int | None:
    """The last dim before d that is reduced and wide, if only size-1 dims lie between."""
    for e in range(d - 1, -1, -1):
        if shape[e] != 1:
            return e if e in dims else None
    return None


def _stages(graph: Graph, node: Node) -> list[Node]:
    """[rows, cols] reduced over cols as [rows, parts, length] over length, then over parts."""
    if not node.args or not node.args[0].is_tensor:
        return [node]
    shape = list(graph.shape_of(node.args[0]))
    blocks = _blocks(shape, node.attrs.get("dim"))
    if len(blocks) != 1 or any(s != 1 for s in shape[blocks[0][-1] + 1 :]):
        return [node]  # not one trailing block: an axis kernel's, or already a chain
    cols = math.prod(shape[blocks[0][0] :])
    rows = math.prod(shape) // cols if cols else 0
    parts = _parts(rows, cols)
    if parts is None:
        return [node]
    grid = (rows, parts, cols // parts)
    chunks = Node(f"{node.name}.chunks", "reshape", node.args[:1], {"shape": list(grid)}, grid)
    partial = Node(
        f"{node.name}.partial",
        node.op,
        (Ref("node", name=chunks.name),),
        {"dim": [2], "keepdim": False},
        grid[:2],
        node.dtype,
    )
    total = replace(
        node,
        name=f"{node.name}.total",
        args=(Ref("node", name=partial.name),),
        attrs={"dim": [1], "keepdim": False},
        shape=(rows,),
    )
    total_ref = Ref("node", name=total.name)
    back = Node(node.name, "reshape", (total_ref,), {"shape": list(node.shape)}, node.shape)
    return [chunks, partial, total, back]


def _parts(rows: int, cols: int) -> int | None:
    """How many parts to cut each row into: the most that divide it, keep MIN_PART elements a
    part and MAX_PARTS parts in all; None when the rows are many or short enough as they are."""
    if rows >= FEW_ROWS or cols < 2 * MIN_PART:
        return None
    for parts in range(min(cols // MIN_PART, MAX_PARTS // max(rows, 1)), 1, -1):
        if cols % parts == 0:
            return parts
    return None


def _norm_in_steps(graph: Graph, node: Node) -> list[Node]:
    """A layer_norm or rms_norm of few long rows as reductions over its normalised dims (keepdim)
    and pointwise ops, the output keeping the node's name; any other norm as it is."""
    if not node.args or not node.args[0].is_tensor:
        return [node]
    x = node.args[0]
    shape = tuple(graph.shape_of(x))
    trailing = len(node.attrs.get("normalized_shape") or ())
    cols = math.prod(shape[len(shape) - trailing :]) if trailing else 0
    rows = math.prod(shape) // cols if cols else 0
    if not trailing or _parts(rows, cols) is None:
        return [node]
    steps = _NormSteps(node, shape, list(range(len(shape) - trailing, len(shape))))
    if node.op == "layer_norm":
        mean = steps.reduced("mean", x)
        deviation = steps.pointwise("deviation", "sub", x, mean)
        square = steps.pointwise("square", "mul", deviation, deviation)
        spread = steps.reduced("variance", square)
        # centred again, not the deviation above: that one stays in the variance's kernel
        value = steps.pointwise("centred", "sub", x, mean)
        scale_and_shift = node.args[1:3]
    else:
        square = steps.pointwise("square", "mul", x, x)
        spread = steps.reduced("mean_square", square)
        value = x
        scale_and_shift = node.args[1:2]
    eps = node.attrs.get("eps")
    if eps is None:  # as the row kernel's body reads it
        eps = 1e-5 if node.op == "layer_norm" else FLOAT32_EPS
    eps = Ref("const", value=float(eps))
    rstd = steps.pointwise("rstd", "rsqrt", steps.pointwise("spread_eps", "add", spread, eps))
    value = steps.pointwise("normed", "mul", value, rstd)
    for ref, combine in zip(scale_and_shift, ("mul", "add"), strict=False):
        if ref.is_tensor:
            value = steps.pointwise(f"{combine}_{ref.name}", combine, value, ref)
    return steps.finished()


class _NormSteps:
    """The nodes of one norm written in steps, named after it."""

    def __init__(self, node: Node, shape: tuple[int, ...], dims: list[int]):
        self.node, self.shape, self.dims, self.nodes = node, shape, dims, []
        self.row_shape = tuple(1 if d in dims else s for d, s in enumerate(shape))

    def pointwise(self, step: str, op: str, *args: Ref) -> Ref:
        row = all(a.kind == "const" or self._is_row(a) for a in args)
        return self._add(step, op, args, {}, self.row_shape if row else self.shape)

    def reduced(self, step: str, source: Ref) -> Ref:
        return self._add(
            step, "mean", (source,), {"dim": self.dims, "keepdim": True}, self.row_shape
        )

    def finished(self) -> list[Node]:
        """The steps, the last (the normalised value) renamed as the norm, which later nodes
        read."""
        *steps, last = self.nodes
        return [*steps, replace(last, name=self.node.name)]

    def _is_row(self, ref: Ref) -> bool:
        return ref.kind == "node" and any(
            n.name == ref.name and n.shape == self.row_shape for n in self.nodes
        )

    def _add(self, step: str, op: str, args, attrs: dict, shape) -> Ref:
        name = f"{self.node.name}.{step}"
        self.nodes.append(Node(name, op, tuple(args), attrs, tuple(shape), self.node.dtype))
        return Ref("node", name=name)
