"""Norms and normalisations lowered to the IR's core ops: p-norms (torch.norm, Tensor.norm,
torch.linalg.vector_norm / norm), F.normalize, and the nn norm layers that have no core op of
their own (BatchNorm in eval and training mode, InstanceNorm, GroupNorm).

One call becomes several IR nodes: the steps are named `<fx node>.<step>` (fx names have no dots,
so they never collide) and the last one carries the call's own name, so its users read it.
Instance and group norms are layer_norm over their trailing dims (a reshape first for groups);
per-channel parameters and statistics are read through a reshape to [C, 1, ...] so that they
broadcast over NC... tensors.
"""

from __future__ import annotations

import math

from torch import fx, nn

from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported

STATS = ("mean", "var")  # a batch norm's running statistics: running_mean, running_var


class NormLowering:
    """Mixed into lowering.Lowering: uses its _tensor, _value, _dims, _emit and nodes."""

    # ---- steps ----
    def _step(self, node: fx.Node, step: str, op: str, args: list, out_shape, **attrs) -> dict:
        name = f"{node.name}.{step}"
        self.nodes.append(
            {
                "name": name,
                "op": op,
                "args": args,
                "attrs": attrs,
                "shape": [int(d) for d in out_shape],
                "dtype": "float32",
            }
        )
        return {"node": name}

    def _channel_view(self, node: fx.Node, step: str, ref: dict, x_shape: list[int]) -> dict:
        """A [C] tensor as [C, 1, ...], to broadcast over the channels of [N, C, ...]."""
        shape = [x_shape[1]] + [1] * (len(x_shape) - 2)
        return self._step(node, step, "reshape", [ref], shape, shape=shape)

    # ---- p-norms ----
    def _lower_norm(self, node: fx.Node, bound: dict) -> None:
        self._float32_only(bound.get("dtype"))
        p = self._value(bound.get("p", "fro"))
        self._norm(node, bound["input"], p, bound.get("dim"), bound.get("keepdim", False))

    def _lower_vector_norm(self, node: fx.Node, bound: dict) -> None:
        self._float32_only(bound.get("dtype"))
        p = self._value(bound.get("ord", 2))
        self._norm(node, bound["input"], p, bound.get("dim"), bound.get("keepdim", False))

    def _lower_linalg_norm(self, node: fx.Node, bound: dict) -> None:
        self._float32_only(bound.get("dtype"))
        p = self._value(bound.get("ord"))
        dims = self._value(bound.get("dim"))
        if p is not None and (dims is None or isinstance(dims, list | tuple) and len(dims) > 1):
            raise Unsupported(f"matrix norms (ord={p!r} over two dims) are {UNSUPPORTED}")
        p = 2 if p is None else p  # the Frobenius norm is the 2-norm of the flattened values
        self._norm(node, bound["input"], p, dims, bound.get("keepdim", False))

    def _norm(self, node: fx.Node, x, p, dims, keepdim) -> None:
        op, args, attrs = self._p_norm_steps(node, x, p, dims, keepdim)
        self._emit(node, op, args, attrs)

    def _p_norm_steps(self, node: fx.Node, x, p, dims, keepdim) -> tuple[str, list, dict]:
        """The steps of ||x||_p over `dims` but the last, returned as (op, args, attrs)."""
        x_ref, x_shape = self._tensor(x), tensor_shape(x)
        dims = self._dims(x, self._value(dims))
        keepdim = bool(self._value(keepdim))
        reduced = [1 if d in dims else s for d, s in enumerate(x_shape) if keepdim or d not in dims]
        over = {"dim": dims, "keepdim": keepdim}
        if p in ("fro", 2, 2.0):
            square = self._step(node, "square", "mul", [x_ref, x_ref], x_shape)
            total = self._step(node, "sum", "sum", [square], reduced, **over)
            return "sqrt", [total], {}
        if isinstance(p, str) or isinstance(p, bool) or not isinstance(p, int | float) or p == 0:
            raise Unsupported(f"the norm with p={p!r} is {UNSUPPORTED}")
        size = self._step(node, "abs", "abs", [x_ref], x_shape)
        if math.isinf(p):
            return ("amax" if p > 0 else "amin"), [size], over
        if p == 1:
            return "sum", [size], over
        powered = self._step(node, "pow", "pow", [size, {"const": p}], x_shape)
        total = self._step(node, "sum", "sum", [powered], reduced, **over)
        return "pow", [total, {"const": 1.0 / p}], {}

    def _lower_normalize(self, node: fx.Node, bound: dict) -> None:
        """F.normalize: x / max(||x||_p over dim, eps)."""
        x, p = bound["input"], self._value(bound.get("p", 2.0))
        dim, eps = self._value(bound.get("dim", 1)), float(self._value(bound.get("eps", 1e-12)))
        op, args, attrs = self._p_norm_steps(node, x, p, dim, True)
        shape = [1 if d in self._dims(x, dim) else s for d, s in enumerate(tensor_shape(x))]
        norm = self._step(node, "norm", op, args, shape, **attrs)
        floor = self._step(node, "clamp", "clamp", [norm], shape, min=eps, max=None)
        self._emit(node, "div", [self._tensor(x), floor])

    # ---- norm layers ----
    def _affine(self, node: fx.Node, value: dict, x_shape, weight, bias) -> None:
        """value * weight + bias per channel (each optional), the last step the call's own."""
        steps = []
        if weight is not None:
            steps.append(("mul", self._channel_view(node, "weight_view", weight, x_shape)))
        if bias is not None:
            steps.append(("add", self._channel_view(node, "bias_view", bias, x_shape)))
        if not steps:
            return self._emit(node, "identity", [value])
        for k, (op, ref) in enumerate(steps):
            attrs = {"alpha": 1} if op == "add" else {}
            if k == len(steps) - 1:
                return self._emit(node, op, [value, ref], attrs)
            value = self._step(node, "scaled", op, [value, ref], x_shape, **attrs)
        return None

    def _instance_norm(self, node: fx.Node, x, module: nn.Module) -> None:
        x_shape = tensor_shape(x)
        if module.track_running_stats and not module.training:
            raise Unsupported(f"instance norm with running statistics is {UNSUPPORTED}")
        if len(x_shape) < 3:
            raise Unsupported("an unbatched input")
        spatial = x_shape[2:]
        weight, bias = self._param(node, "weight", module), self._param(node, "bias", module)
        attrs = {"normalized_shape": spatial, "eps": float(module.eps)}
        args = [self._tensor(x), None, None]
        normed = self._step(node, "normed", "layer_norm", args, x_shape, **attrs)
        self._affine(node, normed, x_shape, weight, bias)

    def _group_norm(self, node: fx.Node, x, module: nn.Module) -> None:
        x_shape = tensor_shape(x)
        if len(x_shape) < 2:
            raise Unsupported("an unbatched input")
        groups = int(module.num_groups)
        grouped = [x_shape[0], groups, math.prod(x_shape[1:]) // groups]
        flat = self._step(node, "grouped", "reshape", [self._tensor(x)], grouped, shape=grouped)
        attrs = {"normalized_shape": grouped[2:], "eps": float(module.eps)}
        normed = self._step(node, "normed", "layer_norm", [flat, None, None], grouped, **attrs)
        back = self._step(node, "ungrouped", "reshape", [normed], x_shape, shape=x_shape)
        weight, bias = self._param(node, "weight", module), self._param(node, "bias", module)
        self._affine(node, back, x_shape, weight, bias)

    def _batch_norm(self, node: fx.Node, x, module: nn.Module) -> None:
        """(x - mean) * rsqrt(var + eps) per channel, then the affine: running statistics in
        eval mode, the batch's own (biased variance) in training mode."""
        x_shape, x_ref = tensor_shape(x), self._tensor(x)
        if len(x_shape) < 2:
            raise Unsupported("an unbatched input")
        if module.training or module.running_mean is None:
            mean, centred, var = self._batch_statistics(node, x_ref, x_shape)
            stats = [1, x_shape[1]] + [1] * (len(x_shape) - 2)
        else:  # the statistics' steps first: the centring then joins the normalising kernel
            mean, var = (
                self._channel_view(node, s, self._param(node, f"running_{s}", module), x_shape)
                for s in STATS
            )
            centred = None
            stats = [x_shape[1]] + [1] * (len(x_shape) - 2)
        eps = {"const": float(module.eps)}
        var_eps = self._step(node, "var_eps", "add", [var, eps], stats, alpha=1)
        rstd = self._step(node, "rstd", "rsqrt", [var_eps], stats)
        if centred is None:
            centred = self._step(node, "centred", "sub", [x_ref, mean], x_shape, alpha=1)
        normed = self._step(node, "normed", "mul", [centred, rstd], x_shape)
        weight, bias = self._param(node, "weight", module), self._param(node, "bias", module)
        self._affine(node, normed, x_shape, weight, bias)

    def _batch_statistics(self, node: fx.Node, x_ref: dict, x_shape) -> tuple[dict, dict, dict]:
        """Mean over the batch and spatial dims, the centred input, the biased variance."""
        mean = self._channel_mean(node, "mean", x_ref, x_shape)
        centred = self._step(node, "centred", "sub", [x_ref, mean], x_shape, alpha=1)
        square = self._step(node, "square", "mul", [centred, centred], x_shape)
        var = self._channel_mean(node, "var", square, x_shape)
        return mean, centred, var

    def _channel_mean(self, node: fx.Node, step: str, ref: dict, x_shape) -> dict:
        """The mean over every dim but the channels' (the fusion compiler splits it in two)."""
        dims = [0] + list(range(2, len(x_shape)))
        shape = [1, x_shape[1]] + [1] * (len(x_shape) - 2)
        return self._step(node, step, "mean", [ref], shape, dim=dims, keepdim=True)


def tensor_shape(x) -> list[int]:
    meta = x.meta.get("tensor_meta") if isinstance(x, fx.Node) else None
    if not hasattr(meta, "shape"):
        raise Unsupported("its operand is not a tensor")
    return [int(d) for d in meta.shape]
