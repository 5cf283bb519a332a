"""A reduction over dims that keep a dim between them (mean over [0, 2, 3] of NCHW) as a chain of
reductions over blocks of adjacent dims, which the planner's row and axis kernels take: the last
block first (keepdim, so the other dims keep their places), then the rest together.

Every reduction of the IR composes so: sum, prod, amax, amin and logsumexp of a part are reduced
again as themselves, and a mean of equal-sized means is the mean.
"""

from __future__ import annotations

from dataclasses import replace

from agent.fusion.ir import Graph, Node, Ref

COMPOSABLE = frozenset({"sum", "mean", "amax", "amin", "prod", "logsumexp"})


def split_reductions(graph: Graph) -> Graph:
    """`graph` with every reduction over separated blocks of dims split into a chain."""
    nodes: list[Node] = []
    for node in graph.nodes:
        nodes += _chain(graph, node) if node.op in COMPOSABLE else [node]
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
