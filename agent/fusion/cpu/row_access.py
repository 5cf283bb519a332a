"""How the C++ kernels walk their element space: along rows of `cols` elements, each operand's
row offset hoisted out of the row, so the innermost loop is a `#pragma omp simd` over contiguous
(or broadcast) memory. Shared by every cpu kernel kind.
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import BNode, Body, fixed_operand, load_expression
from agent.fusion.cpu.prelude import DIALECT
from agent.fusion.ir import row_base, split_axis, split_rows


class RowAccess:
    """Element-level loads read along rows of `cols`: hoisted row offsets, per-element access.
    With `inner` > 1 (an axis kernel) row r is output (r / inner, r % inner) and its elements are
    `inner` apart: element (r, c) is at (r / inner * cols + c) * inner + r % inner."""

    def __init__(self, body: Body, rows: int, cols: int, inner: int = 1):
        self.body, self.rows, self.cols, self.inner = body, rows, cols, inner
        self.split = {n.id: self._split(n) for n in body.loads("elem")}

    def _split(self, n: BNode):
        if n.indexed:
            return None
        if self.inner == 1:
            return split_rows(n.terms, n.total, self.cols)
        return split_axis(n.terms, n.total, self.cols, self.inner)

    def element_index(self, row: str = "r") -> str:
        """The flat index of element (row, c) of the element space."""
        if self.inner == 1:
            return f"{row} * {self.cols} + c"
        inner = self.inner
        return f"{row} / {inner} * {self.cols * inner} + c * {inner} + {row} % {inner}"

    def setup(self, indent: str, row: str = "r") -> list[str]:
        """Per-row offsets, row-constant loads, row-level loads."""
        lines = []
        for n in self.body.loads("elem"):
            split = self.split[n.id]
            if split is None:
                continue
            lines.append(f"{indent}const int64_t b{n.id} = {row_base(split, self.rows, row)};")
            if split.col == 0:
                lines.append(f"{indent}const float a{n.id} = {n.buffer}[b{n.id}];")
        for n in self.body.loads("row"):
            lines.append(f"{indent}const float a{n.id} = {load_expression(n, row)};")
        return lines

    def load(self, n: BNode, indent: str, row: str = "r") -> list[str]:
        split = self.split[n.id]
        if split is None:
            return [f"{indent}const float a{n.id} = {load_expression(n, self.element_index(row))};"]
        if split.col == 0:
            return []
        column = "c" if split.col == 1 else f"c * {split.col}"
        return [f"{indent}const float a{n.id} = {n.buffer}[b{n.id} + {column}];"]

    def ref(self, i: int) -> str:
        node = self.body.nodes[i]
        if fixed_operand(node) is not None:
            return fixed_operand(node)
        if node.kind == "load":
            return f"a{i}"
        if node.kind == "acc":
            return "acc"
        return f"s{i}" if node.level == "row" else f"e{i}"

    def ops(self, nodes: list[BNode], indent: str) -> list[str]:
        return expressions.statements(nodes, self.ref, indent, DIALECT)

    def row_ops(self, depth: int, indent: str = "      ") -> list[str]:
        """The row-level ops known once `depth` reductions have finished."""
        return expressions.row_statements(self.body, depth, self.ref, indent, DIALECT)

    def loads(self, nodes: list[BNode], indent: str, row: str = "r") -> list[str]:
        return [line for n in nodes if n.kind == "load" for line in self.load(n, indent, row)]
