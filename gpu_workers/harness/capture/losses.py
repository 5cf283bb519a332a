"""Losses lowered to the IR's core ops: an elementwise term, then the reduction the call asks for
(mean, sum, batchmean or none). MSE, L1, smooth L1 and Huber, KL divergence, cosine similarity,
the triplet margin loss and cross-entropy over int64 class targets; the steps are named
`<call>.<step>` as in norms.
"""

from __future__ import annotations

import torch
from torch import fx

from gpu_workers.harness.capture.norms import tensor_shape
from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported, dtype_name

REDUCTIONS = ("mean", "sum", "none")


class LossLowering:
    """Mixed into lowering.Lowering, beside norms.NormLowering (its _step)."""

    def _loss_operands(self, bound: dict, second="target") -> tuple[dict, dict, list[int]]:
        a, b = bound["input"], bound[second]
        shape = list(torch.broadcast_shapes(tensor_shape(a), tensor_shape(b)))
        return self._tensor(a), self._tensor(b), shape

    def _finish_loss(
        self, node: fx.Node, term: dict, shape, bound: dict, allowed=REDUCTIONS
    ) -> None:
        """The loss from its elementwise `term` as the call's `reduction` asks."""
        for legacy in ("size_average", "reduce", "weight"):
            if self._value(bound.get(legacy)) is not None:
                raise Unsupported(f"a loss with {legacy}= is {UNSUPPORTED}")
        reduction = self._value(bound.get("reduction", "mean"))
        if reduction not in allowed:
            raise Unsupported(f"reduction={reduction!r} is {UNSUPPORTED}")
        every = {"dim": list(range(len(shape))), "keepdim": False}
        if reduction == "none":
            return self._emit(node, "identity", [term])
        if reduction == "batchmean":  # sum / batch size, as F.kl_div defines it
            total = self._step(node, "sum", "sum", [term], [], **every)
            return self._emit(node, "div", [total, {"const": shape[0] if shape else 1}])
        return self._emit(node, reduction, [term], every)

    def _difference(self, node: fx.Node, bound: dict) -> tuple[dict, list[int]]:
        a, b, shape = self._loss_operands(bound)
        return self._step(node, "diff", "sub", [a, b], shape, alpha=1), shape

    def _lower_mse_loss(self, node: fx.Node, bound: dict) -> None:
        diff, shape = self._difference(node, bound)
        square = self._step(node, "square", "mul", [diff, diff], shape)
        self._finish_loss(node, square, shape, bound)

    def _lower_l1_loss(self, node: fx.Node, bound: dict) -> None:
        diff, shape = self._difference(node, bound)
        size = self._step(node, "abs", "abs", [diff], shape)
        self._finish_loss(node, size, shape, bound)

    def _lower_smooth_l1_loss(self, node: fx.Node, bound: dict) -> None:
        """0.5 d² / beta where |d| < beta, else |d| - 0.5 beta: with m = min(|d|, beta), that is
        0.5 m² / beta + (|d| - m), one expression without a branch."""
        beta = float(self._value(bound.get("beta", 1.0)))
        self._quadratic_then_linear(node, bound, beta, 0.5 / beta if beta else 0.0, 1.0)

    def _lower_huber_loss(self, node: fx.Node, bound: dict) -> None:
        """0.5 d² where |d| <= delta, else delta (|d| - 0.5 delta): 0.5 m² + delta (|d| - m)."""
        delta = float(self._value(bound.get("delta", 1.0)))
        self._quadratic_then_linear(node, bound, delta, 0.5, delta)

    def _quadratic_then_linear(self, node, bound, knee: float, quad: float, slope: float) -> None:
        diff, shape = self._difference(node, bound)
        size = self._step(node, "abs", "abs", [diff], shape)
        inside = self._step(node, "inside", "clamp", [size], shape, min=None, max=knee)
        square = self._step(node, "square", "mul", [inside, inside], shape)
        scaled = self._step(node, "quadratic", "mul", [square, {"const": quad}], shape)
        beyond = self._step(node, "beyond", "sub", [size, inside], shape, alpha=1)
        term = self._step(node, "term", "add", [scaled, beyond], shape, alpha=slope)
        self._finish_loss(node, term, shape, bound)

    def _lower_kl_div(self, node: fx.Node, bound: dict) -> None:
        """target * (log(target) - input), or exp(target) * (target - input) with log_target;
        a zero target gives NaN where torch gives 0 (xlogy): targets are probabilities > 0."""
        log_input, target, shape = self._loss_operands(bound)
        if self._value(bound.get("log_target", False)):
            weight = self._step(node, "weight", "exp", [target], shape)
            log_target = target
        else:
            weight = target
            log_target = self._step(node, "log_target", "log", [target], shape)
        gap = self._step(node, "gap", "sub", [log_target, log_input], shape, alpha=1)
        term = self._step(node, "term", "mul", [weight, gap], shape)
        self._finish_loss(node, term, shape, bound, (*REDUCTIONS, "batchmean"))

    def _lower_cosine_similarity(self, node: fx.Node, bound: dict) -> None:
        """sum(a * b) / (max(||a||, eps) * max(||b||, eps)) along dim."""
        a, b, shape = self._loss_operands(bound, "x2")
        dim = self._value(bound.get("dim", 1)) % len(shape)
        eps = float(self._value(bound.get("eps", 1e-8)))
        over = {"dim": [dim], "keepdim": False}
        reduced = [s for d, s in enumerate(shape) if d != dim]
        norms = []
        for name, ref in (("x1", a), ("x2", b)):
            square = self._step(node, f"{name}_square", "mul", [ref, ref], shape)
            total = self._step(node, f"{name}_sum", "sum", [square], reduced, **over)
            norm = self._step(node, f"{name}_norm", "sqrt", [total], reduced)
            floor = self._step(node, f"{name}_floor", "clamp", [norm], reduced, min=eps, max=None)
            norms.append(floor)
        product = self._step(node, "product", "mul", [a, b], shape)
        dot = self._step(node, "dot", "sum", [product], reduced, **over)
        scale = self._step(node, "scale", "mul", norms, reduced)
        self._emit(node, "div", [dot, scale])

    def _lower_triplet_margin_loss(self, node: fx.Node, bound: dict) -> None:
        """max(d(a, p) - d(a, n) + margin, 0) with d(x, y) = ||x - y + eps||_2 along the last
        dim (F.pairwise_distance), then the reduction."""
        if self._value(bound.get("p", 2)) != 2 or self._value(bound.get("swap", False)):
            raise Unsupported(f"a triplet margin loss with p != 2 or swap is {UNSUPPORTED}")
        margin = float(self._value(bound.get("margin", 1.0)))
        eps = float(self._value(bound.get("eps", 1e-6)))
        distances = []
        for name in ("positive", "negative"):
            anchor, other, shape = self._loss_operands(bound, name)
            reduced, last = shape[:-1], {"dim": [len(shape) - 1], "keepdim": False}
            diff = self._step(node, f"{name}_diff", "sub", [anchor, other], shape, alpha=1)
            gap = [diff, {"const": eps}]
            shifted = self._step(node, f"{name}_shifted", "add", gap, shape, alpha=1)
            square = self._step(node, f"{name}_square", "mul", [shifted, shifted], shape)
            total = self._step(node, f"{name}_sum", "sum", [square], reduced, **last)
            distances.append(self._step(node, f"{name}_distance", "sqrt", [total], reduced))
        gap = self._step(node, "gap", "sub", distances, reduced, alpha=1)
        shifted = self._step(node, "margin", "add", [gap, {"const": margin}], reduced, alpha=1)
        hinge = self._step(node, "hinge", "clamp", [shifted], reduced, min=0.0, max=None)
        self._finish_loss(node, hinge, reduced, bound)

    def _lower_cross_entropy(self, node: fx.Node, bound: dict) -> None:
        """-log_softmax(x)[target] along the class dim (1, or 0 unbatched) is logsumexp(x) minus
        the target's logit, `pick`ed where x lies: the log-probabilities are never written."""
        x, target = bound["input"], bound["target"]
        if dtype_name(target.meta["tensor_meta"].dtype) != "int64":
            raise Unsupported(f"cross-entropy with class probabilities is {UNSUPPORTED}")
        if self._value(bound.get("label_smoothing", 0.0)):
            raise Unsupported(f"cross-entropy with label_smoothing is {UNSUPPORTED}")
        x_shape, shape = tensor_shape(x), tensor_shape(target)
        dim = 1 if len(x_shape) > 1 else 0
        x_ref, target_ref = self._tensor(x), self._tensor(target)
        over = {"dim": [dim], "keepdim": False}
        lse = self._step(node, "logsumexp", "logsumexp", [x_ref], shape, **over)
        logit = self._step(node, "logit", "pick", [x_ref, target_ref], shape, dim=dim)
        term = self._step(node, "term", "sub", [lse, logit], shape, alpha=1)
        self._finish_loss(node, term, shape, bound)
