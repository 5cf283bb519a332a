"""Input sensitivity: does a problem's output follow its inputs where a constant would pass?

A mean loss over many random values (KernelBench's level 1 losses: cross-entropy, KL divergence,
MSE, cosine similarity) gives nearly the same number for every seed of get_inputs(), so a kernel
that returns that number and ignores its inputs passes trials drawn from that distribution. A
probe moves the floating-point inputs out of it (scaled, shifted) where the reference output
moves too. Validation accepts a problem that some probe reveals, and rejects one that none does;
verify adds a trial on the revealing probe, so the constant kernel fails there.
"""

from __future__ import annotations

import torch

# Each transforms every floating-point input the same way. Scaling reveals magnitudes (a mean
# squared error, a cross-entropy's confidence); shifting reveals scale-invariant losses (cosine
# similarity), which scaling cannot.
PROBES = {
    "scaled": lambda t: t * 4,
    "shifted": lambda t: t + 1,
}
# Comparing outputs needs a copy of the first set's outputs; beyond this many elements they are
# not a scalar loss, and the "nearly constant" check of validation judges them instead.
MAX_COPIED_ELEMENTS = 1 << 24


def probe_inputs(name: str | None, inputs: list) -> list:
    """The inputs under probe `name` (unchanged for None); non-float values pass through."""
    if name is None:
        return inputs
    transform = PROBES[name]
    return [
        transform(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
    ]


def close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape
        and torch.allclose(x.float(), y.float(), atol=atol, rtol=rtol, equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


def copy_if_small(outputs: list[torch.Tensor]) -> list[torch.Tensor] | None:
    if sum(t.numel() for t in outputs) > MAX_COPIED_ELEMENTS:
        return None
    return [t.clone() for t in outputs]


def revealing_probe(judge, reference, slot: int, seed: int, baseline) -> str | None:
    """The first probe whose reference outputs (made in `slot` for `seed`) are finite and differ
    from `baseline` beyond the protocol's tolerance; the slot then holds that probe's set."""
    protocol = judge.protocol
    for name in PROBES:
        held = judge.make_set(reference, slot, seed, probe=name)
        finite = all(torch.isfinite(t).all() for t in held.outputs if t.is_floating_point())
        if finite and not close(held.outputs, baseline, protocol.atol, protocol.rtol):
            return name
    return None
