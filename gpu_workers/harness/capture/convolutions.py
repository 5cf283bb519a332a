"""Convolutions (nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d) lowered to the IR's conv: args x,
weight and bias (or null); attrs per spatial dim (the trailing ones) the kernel's size, stride,
padding and dilation, `output_padding` (transposed: the output shape already tells), `groups`
and `transposed`. Zero padding only; padding="same" is refused (the planner would need the
asymmetric padding torch chooses), padding="valid" is 0.
"""

from __future__ import annotations

from torch import fx, nn
from torch.nn.modules.conv import _ConvTransposeNd

from gpu_workers.harness.capture.ops import Unsupported


def conv_module(lowering, node: fx.Node, x, module: nn.Module) -> None:
    """A lowering of _MODULES (lowering.py): uses the Lowering's _param, _tensor and _emit."""
    if module.padding_mode != "zeros":
        raise Unsupported(f"padding_mode={module.padding_mode!r} is not supported; only zeros")
    spatial = len(module.kernel_size)
    padding = module.padding
    if padding == "valid":
        padding = (0,) * spatial
    elif isinstance(padding, str):
        raise Unsupported(f"padding={padding!r} is not supported yet; give the padding as ints")
    transposed = isinstance(module, _ConvTransposeNd)
    attrs = {
        "kernel_size": list(module.kernel_size),
        "stride": list(module.stride),
        "padding": list(padding),
        "dilation": list(module.dilation),
        "output_padding": list(module.output_padding) if transposed else [0] * spatial,
        "groups": int(module.groups),
        "transposed": transposed,
    }
    weight, bias = lowering._param(node, "weight", module), lowering._param(node, "bias", module)
    lowering._emit(node, "conv", [lowering._tensor(x), weight, bias], attrs)
