"""Contractions lowered to the IR's matmul: `torch.einsum` (one operand: sums and a permute; two:
one batched matmul between permutes and reshapes) and `F.scaled_dot_product_attention` (q kᵀ,
scaled, a softmax, times v). Steps are named `<fx node>.<step>`, the last the call's own name
(norms.py's convention), and a permute or reshape that would change nothing is not emitted.
"""

from __future__ import annotations

import math
import re

from torch import fx

from gpu_workers.harness.capture.norms import tensor_shape
from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported

_EINSUM_TERM = re.compile(r"^[a-zA-Z]*$")


def _prod(sizes) -> int:
    return math.prod(int(s) for s in sizes)


class ContractionLowering:
    """Mixed into lowering.Lowering: uses its _tensor, _value, _emit and _step."""

    # ---- einsum ----
    def _lower_einsum(self, node: fx.Node, bound: dict) -> None:
        equation, operands = self._einsum_call(node)
        inputs, output = _parse_equation(equation, len(operands))
        shapes = [tensor_shape(x) for x in operands]
        sizes: dict[str, int] = {}
        for letters, shape in zip(inputs, shapes, strict=True):
            if len(letters) != len(shape) or len(set(letters)) != len(letters):
                raise Unsupported(
                    f"einsum term {letters!r} of a {len(shape)}-d operand (repeated or missing "
                    f"letters: diagonals and broadcasting are {UNSUPPORTED})"
                )
            for letter, size in zip(letters, shape, strict=True):
                if sizes.setdefault(letter, size) != size:
                    raise Unsupported(f"einsum letter {letter!r} has sizes {sizes[letter]}, {size}")
        refs = [self._tensor(x) for x in operands]
        # a letter in one operand only and not in the output is summed there first
        for k, letters in enumerate(inputs):
            others = set(output).union(*(inputs[j] for j in range(len(inputs)) if j != k))
            alone = [d for d, letter in enumerate(letters) if letter not in others]
            if alone:
                kept = [size for d, size in enumerate(shapes[k]) if d not in alone]
                refs[k] = self._step(
                    node, f"sum{k}", "sum", [refs[k]], kept, dim=alone, keepdim=False
                )
                inputs[k] = "".join(c for d, c in enumerate(letters) if d not in alone)
                shapes[k] = kept
        if len(refs) == 1:
            self._arrange(node, refs[0], inputs[0], output, sizes)
            return
        self._contract(node, refs, inputs, output, sizes)

    def _einsum_call(self, node: fx.Node) -> tuple[str, list]:
        args = list(node.args)
        if not args or not isinstance(args[0], str) or node.kwargs:
            raise Unsupported(
                f"einsum called other than einsum(equation, *operands): {UNSUPPORTED}"
            )
        operands = args[1:]
        if len(operands) == 1 and isinstance(operands[0], list | tuple):
            operands = list(operands[0])
        if len(operands) not in (1, 2):
            raise Unsupported(f"einsum of {len(operands)} operands is {UNSUPPORTED} (one or two)")
        return args[0], operands

    def _contract(self, node, refs: list, inputs: list[str], output: str, sizes: dict) -> None:
        """A[batch, m, k] @ B[batch, k, n] -> [batch, m, n], then the output's order."""
        a, b = inputs
        batch = [c for c in a if c in b and c in output]
        summed = [c for c in a if c in b and c not in output]
        m = [c for c in a if c not in b]
        n = [c for c in b if c not in a]
        left = self._arranged(node, "a", refs[0], a, batch + m + summed, sizes)
        right = self._arranged(node, "b", refs[1], b, batch + summed + n, sizes)
        dims = [_prod(sizes[c] for c in group) for group in (m, summed, n)]
        lead = [_prod(sizes[c] for c in batch)] if batch else []
        left = self._view(node, "a_matrix", left, batch + m + summed, lead + dims[:2], sizes)
        right = self._view(node, "b_matrix", right, batch + summed + n, lead + dims[1:], sizes)
        product = self._step(node, "product", "matmul", [left, right], lead + [dims[0], dims[2]])
        natural = batch + m + n
        shaped = self._view(
            node, "product_shaped", product, None, [sizes[c] for c in natural], sizes
        )
        self._arrange(node, shaped, "".join(natural), output, sizes)

    def _arranged(self, node, step: str, ref: dict, letters: str, order: list[str], sizes):
        """`ref` (dims named by `letters`) permuted to `order`."""
        dims = [letters.index(c) for c in order]
        if dims == list(range(len(dims))):
            return ref
        shape = [sizes[c] for c in order]
        return self._step(node, f"{step}_permuted", "permute", [ref], shape, dims=dims)

    def _view(self, node, step: str, ref: dict, letters, shape: list[int], sizes) -> dict:
        """`ref` reshaped to `shape`, unless it has that shape already."""
        current = [sizes[c] for c in letters] if letters is not None else None
        if current == shape:
            return ref
        return self._step(node, step, "reshape", [ref], shape, shape=shape)

    def _arrange(self, node, ref: dict, letters: str, output: str, sizes: dict) -> None:
        """The call's own node: `ref` in the output's order (a permute, or an identity)."""
        dims = [letters.index(c) for c in output]
        if dims == list(range(len(dims))):
            self._emit(node, "identity", [ref])
        else:
            self._emit(node, "permute", [ref], {"dims": dims})

    # ---- attention ----
    def _lower_scaled_dot_product_attention(self, node: fx.Node, bound: dict) -> None:
        """softmax(q kᵀ · scale) v, scale 1/sqrt(E) unless given; no mask, causal or dropout."""
        if bound.get("attn_mask") is not None or self._value(bound.get("is_causal", False)):
            raise Unsupported(f"attention with a mask or is_causal is {UNSUPPORTED}")
        if self._value(bound.get("dropout_p", 0.0)):
            raise Unsupported(f"attention with dropout_p > 0 is random: {UNSUPPORTED}")
        if self._value(bound.get("enable_gqa", False)):
            raise Unsupported(f"grouped-query attention (enable_gqa) is {UNSUPPORTED}")
        q, k, v = (self._tensor(bound[name]) for name in ("input", "key", "value"))
        q_shape, k_shape = tensor_shape(bound["input"]), tensor_shape(bound["key"])
        if len(q_shape) < 2 or q_shape[:-2] != k_shape[:-2]:
            raise Unsupported(f"attention over {q_shape} and {k_shape}: batch dims differ")
        scale = self._value(bound.get("scale"))
        scale = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
        ndim = len(k_shape)
        swap = list(range(ndim - 2)) + [ndim - 1, ndim - 2]
        key_t = self._step(node, "key_t", "permute", [k], [k_shape[d] for d in swap], dims=swap)
        scores_shape = [*q_shape[:-1], k_shape[-2]]
        scores = self._step(node, "scores", "matmul", [q, key_t], scores_shape)
        scaled = self._step(node, "scaled", "mul", [scores, {"const": scale}], scores_shape)
        weights = self._step(node, "weights", "softmax", [scaled], scores_shape, dim=ndim - 1)
        self._emit(node, "matmul", [weights, v])


def _parse_equation(equation: str, count: int) -> tuple[list[str], str]:
    """(the operands' letters, the output's), implicit output as torch spells it: the letters
    that appear once, in alphabetical order."""
    text = equation.replace(" ", "")
    if "." in text:
        raise Unsupported(f"einsum with an ellipsis ({equation!r}) is {UNSUPPORTED}")
    left, arrow, output = text.partition("->")
    inputs = left.split(",")
    if len(inputs) != count or not all(map(_EINSUM_TERM.match, [*inputs, output])):
        raise Unsupported(f"einsum equation {equation!r} for {count} operand(s)")
    if not arrow:
        letters = "".join(inputs)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if len(set(output)) != len(output) or not set(output) <= set("".join(inputs)):
        raise Unsupported(f"einsum output {output!r} of {equation!r}")
    return inputs, output
