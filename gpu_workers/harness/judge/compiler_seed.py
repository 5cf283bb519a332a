"""The part of torch.compile's first compile that is the machine's, not the problem's, paid once.

A reference runner starts with an empty Inductor and Triton cache (its /tmp is private), so every
torch.compile it times or validates pays what any first compile pays: on a 2-core host, 14 s of
a small problem's 21 s went to the C++ compiler's ISA checks and Inductor's shared code, 4 s to
the problem's own kernels (on a GPU, Triton builds its launcher stub the same way). Sharing one
writable cache between runners would let one user's problem plant compiled code in another's
baseline. So a trusted step (no user code) compiles a fixed toy function once per machine into a
seed folder, published whole; each reference runner that may compile copies the seed into its
private caches (read-only to it, under a megabyte) before its first compile. The caches' own keys
(torch's version, the compiler, the ISA) decide what of it is reused: a stale seed only misses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.judge import environment, gpu_lock
from gpu_workers.harness.sandbox import launch as sandbox

log = logging.getLogger(__name__)

# Each cache the seed holds: its folder in the seed, and the variable that points the compiler at
# it (read at each use by both, so setting it before the first compile is enough).
CACHES = {"inductor": "TORCHINDUCTOR_CACHE_DIR", "triton": "TRITON_CACHE_DIR"}
_BUILD_TIMEOUT_S = 600
_METHOD = 1  # bump when the toy function or the folders change: a new seed is built


def seed_path(device: str) -> Path:
    """Where this machine's seed for `device` lives (present once built)."""
    return settings.cache_dir() / "compiler-seed" / _key(device, settings.gpu_index())


@functools.cache
def _key(device: str, gpu_index: str) -> str:
    """Once per process: every session's and reference's start asks, and on a GPU the device's
    name costs an nvidia-smi call."""
    import torch

    name = environment.device_name(device, gpu_index)
    key = json.dumps([_METHOD, device, name, torch.__version__, torch.version.cuda])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def ready(device: str) -> Path | None:
    """The seed, where it is built; None otherwise (nothing is built here)."""
    path = seed_path(device)
    return path if path.is_dir() else None


def ensure(device: str) -> Path | None:
    """The seed, built first where this machine has none; None where building it failed (once:
    the reason stays beside it, and runners compile from nothing, as before)."""
    path = seed_path(device)
    if path.is_dir():
        return path
    failed = path.with_name(f"{path.name}.failed")
    if failed.is_file():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=".staged-", dir=path.parent))
    try:
        started = time.monotonic()
        error = _build(staged, device)
        if error:
            failed.write_text(error)
            log.warning("compiler seed for %s not built: %s", device, error)
            return None
        try:
            staged.rename(path)
        except OSError:  # another process published it first
            pass
        log.info("compiler seed for %s built in %.1f s", device, time.monotonic() - started)
        return path if path.is_dir() else None
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _build(staged: Path, device: str) -> str | None:
    # a build: on the cpu target no timing runs beside it, on a GPU no quiet one
    with tempfile.TemporaryDirectory() as work, gpu_lock.compiling(device):
        _, error = sandbox.run_step(
            "compiler_seed",
            {"directory": str(staged), "device": device},
            Path(work),
            device,
            _BUILD_TIMEOUT_S,
            view=sandbox.View(writable=(staged,)),
        )
    return error


def build_in_child(request: dict) -> dict:
    """The trusted step: a toy function (pointwise and a row reduction) compiled and run once,
    with the caches pointed into the seed folder."""
    point_caches_at(Path(request["directory"]))
    import torch

    device = request["device"]
    compiled = torch.compile(_toy)
    x = torch.randn(64, 256, device=device)
    w = torch.randn(256, device=device)
    compiled(x, w)
    if device == "cuda":
        torch.cuda.synchronize()
    return {}


def _toy(x, w):
    import torch

    return torch.relu(x * w + 1.0).sum(-1)


def point_caches_at(root: Path) -> None:
    for name, variable in CACHES.items():
        os.environ[variable] = str(root / name)


def lend(seed: Path) -> None:
    """In a runner: copies the seed into private caches under this process's /tmp and points
    the compilers at them, before any compile."""
    private = Path(tempfile.mkdtemp(prefix="compile-cache-"))
    for name in CACHES:
        if (seed / name).is_dir():
            shutil.copytree(seed / name, private / name, ignore=shutil.ignore_patterns("locks"))
    point_caches_at(private)
