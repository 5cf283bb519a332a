"""What a machine pays once, before its first judged step, paid when a worker starts rather than
inside a user's first run: the precompiled torch prelude every binding file includes (24 s on a
lent H200), the compiler seed every torch.compile of a baseline or a validation starts from
(judge/compiler_seed.py) and the device's measured peaks, the speed-of-light floor's inputs
(9 s). All are cached per machine (the compile cache, roofline's peaks file), so a second worker
finds them.
"""

from __future__ import annotations

import time

from gpu_workers.harness.build import compile
from gpu_workers.harness.judge import compiler_seed, gpu_lock, roofline


def warm(device: str) -> dict[str, float]:
    """Seconds each part took (near 0 where it was already cached)."""
    seconds = {}
    started = time.monotonic()
    compile.warm(device)
    seconds["precompiled header"] = time.monotonic() - started
    started = time.monotonic()
    compiler_seed.ensure(device)
    seconds["compiler seed"] = time.monotonic() - started
    started = time.monotonic()
    with gpu_lock.hold(
        device, "the machine's warm-up"
    ):  # peaks are timings: no other measurement beside them
        roofline.peaks(device)
    seconds["peaks"] = time.monotonic() - started
    return seconds
