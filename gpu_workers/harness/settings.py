"""The one place the harness reads its environment."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SKILLS_DIR = REPO_ROOT / "skills"
EXTENSION_NAME = "kernel_ext"
TARGETS = ("cuda", "cpu")
SANDBOX_MODES = ("bwrap", "unconfined")


def cache_dir() -> Path:
    """Compiled objects, extensions, baselines and peak measurements live here."""
    path = Path(os.environ.get("KERNELARENA_CACHE") or Path.home() / ".cache" / "kernelarena")
    path.mkdir(parents=True, exist_ok=True)
    return path


def publish_json(path: Path, data, replace: bool = True) -> None:
    """Writes `data` as JSON to `path` in the cache, whole or not at all (a temporary file,
    renamed): the workers of a machine read what the others write. replace=False keeps a file
    another process published first (a hard link never overwrites)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out)
    if replace:
        os.replace(partial, path)
        return
    try:
        os.link(partial, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(partial)


def cpu_count() -> int:
    """The cores this process may run on: on a host of several GPUs each GPU's workers get a
    share of their own (webapp/host_gpus.py), and ninja's jobs, OpenMP's threads and
    torch.compile's compile workers keep to it, so one GPU's builds never slow another's timing."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def gpu_index() -> str:
    """The GPU this worker owns; the sandbox pins children to it with CUDA_VISIBLE_DEVICES."""
    return os.environ.get("KERNELARENA_GPU", os.environ.get("CUDA_VISIBLE_DEVICES", "0")) or "0"


def check_judge_on_its_gpu(current_device: int) -> None:
    """Refuses a judge whose own CUDA device (`current_device`, as torch numbers the devices this
    process sees) is not the GPU its runners are pinned to: the buffers it shares with them would
    live on another GPU, and every timing would read them across the link (on a lent host of four
    H200s, eager timed up to 34 times slower). A worker of `make run` sees only its GPU
    (CUDA_VISIBLE_DEVICES), a GRPO rank under accelerate sees every GPU and works on its own."""
    visible = [
        d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()
    ]
    own = visible[current_device] if current_device < len(visible) else str(current_device)
    pinned = gpu_index().split(",")[0].strip()  # the runners' device 0
    if own != pinned:
        raise RuntimeError(
            f"this process judges on GPU {own} but pins its runners to GPU {pinned} "
            f"(KERNELARENA_GPU): set CUDA_VISIBLE_DEVICES={pinned} for it, or KERNELARENA_GPU={own}"
        )


def sandbox_mode() -> str:
    """`bwrap` (the default) confines every step; `unconfined` is for development only, and every
    verdict made so says so."""
    mode = os.environ.get("KERNELARENA_SANDBOX", "bwrap").strip() or "bwrap"
    if mode not in SANDBOX_MODES:
        choices = ", ".join(SANDBOX_MODES)
        raise ValueError(f"KERNELARENA_SANDBOX={mode!r} is not a sandbox mode: use {choices}")
    return mode


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str) -> str:
    if device not in TARGETS:
        raise ValueError(f"unknown device {device!r}: use one of {', '.join(TARGETS)}")
    return device
