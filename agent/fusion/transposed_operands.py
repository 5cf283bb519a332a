"""A matmul operand that is a transpose of its last two dims (`A.T @ B`, `x @ w.transpose(-1, -2)`)
read as it lies in memory, with the GEMM told it is transposed (cuBLAS's operation flags, the cpu
SGEMM's strides), instead of a kernel copying it transposed before the GEMM: that copy read and
wrote a whole operand once more (KernelBench level 1's 16-18 ran at 0.59-0.80x of torch.compile
with it; `x @ w.T` of a 2-D parameter never needed this: capture makes it a linear).

The matmul keeps its op and takes `trans_a` / `trans_b` attrs (compiler-internal: the captured IR
never has them), its operand becoming the permute's source; a permute that nothing else reads is
then dead and planned in no kernel.
"""

from __future__ import annotations

from dataclasses import replace

from agent.fusion.ir import Graph, Node, Ref
from agent.fusion.plan import MATMULS

PRODUCTS = MATMULS - {"linear"}  # a linear's weight is already read transposed ("nt")
FLAGS = ("trans_a", "trans_b")


def fold_transposed_operands(graph: Graph) -> Graph:
    """`graph` with each matmul operand that transposes the last two dims of a tensor replaced
    by that tensor and the matmul's flag for it set."""
    nodes = [_folded(graph, node) if node.op in PRODUCTS else node for node in graph.nodes]
    if all(new is old for new, old in zip(nodes, graph.nodes, strict=True)):
        return graph
    return Graph(graph.device, graph.inputs, graph.params, nodes, graph.outputs, graph.unsupported)


def _folded(graph: Graph, node: Node) -> Node:
    args, attrs = list(node.args), dict(node.attrs)
    for position, flag in enumerate(FLAGS):
        if position >= len(args) or attrs.get(flag):
            continue
        source = _transposed_source(graph, args[position])
        if source is not None:
            args[position], attrs[flag] = source, True
    if args == list(node.args):
        return node
    return replace(node, args=tuple(args), attrs=attrs)


def _transposed_source(graph: Graph, ref: Ref) -> Ref | None:
    """The tensor `ref` is a swap of the last two dims of (through identities), or None."""
    while ref.kind == "node" and graph.node_by_name[ref.name].op == "identity":
        ref = graph.node_by_name[ref.name].args[0]
    if ref.kind != "node":
        return None
    node = graph.node_by_name[ref.name]
    if node.op != "permute" or not node.args or not node.args[0].is_tensor:
        return None
    rank = len(node.shape)
    swap = (*range(rank - 2), rank - 1, rank - 2)
    dims = tuple(node.attrs.get("dims", ()))
    if rank < 2 or dims != swap or graph.dtype_of(node.args[0]) != "float32":
        return None
    return node.args[0]
