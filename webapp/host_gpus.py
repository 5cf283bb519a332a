"""The GPUs of this host that a stack (`make run`, webapp/serve.py) puts workers on.

A host of several GPUs gets a set of workers per GPU, each pinned to its GPU: KERNELARENA_GPU,
which the harness's sandbox turns into its children's CUDA_VISIBLE_DEVICES and the measurement
lock's name, and CUDA_VISIBLE_DEVICES for the worker's own CUDA work (the judge's side of a
timing). Timings on one GPU then never wait for another's, and a level of baselines or runs
spreads over all of them. Which GPUs:

    KERNELARENA_GPUS=0,2     these, by nvidia-smi's index or UUID (or a UUID's prefix)
    CUDA_VISIBLE_DEVICES=1   otherwise these, when set
    (neither)                every GPU of the first GPU's type

A worker is pinned by its GPU's UUID, which CUDA and nvidia-smi read alike.

Each GPU's workers also get a share of the host's cores of their own (`cpu_shares`): a timing's
launches wait for a core like anything else, so kept to its share a GPU's timing competes only
with its own workers' builds (ninja, torch.compile's compile workers), as on a host of one GPU.

Only GPUs of one type serve one stack, the first listed one's: the board ranks per GPU type and a
queue per type is what the workers share (webapp/work_kinds.py); a GPU of another type named in
KERNELARENA_GPUS is refused with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass


class GpuChoiceError(ValueError):
    """KERNELARENA_GPUS or CUDA_VISIBLE_DEVICES names GPUs this stack cannot use; says why."""


@dataclass(frozen=True)
class Gpu:
    index: str  # nvidia-smi's, in PCI order
    name: str  # "NVIDIA H200"
    uuid: str = ""  # "GPU-5397dcb0-..."

    @property
    def gpu_type(self) -> str:
        return gpu_type(self.name)

    @property
    def pin(self) -> str:
        """How a worker names its GPU in CUDA_VISIBLE_DEVICES and KERNELARENA_GPU: the UUID,
        which means the same GPU to CUDA and nvidia-smi (CUDA numbers devices fastest first,
        nvidia-smi in PCI order: the same only on a host of one kind of GPU)."""
        return self.uuid or self.index

    def named_by(self, token: str) -> bool:
        """`token` (from CUDA_VISIBLE_DEVICES or KERNELARENA_GPUS) is this GPU's index, its
        UUID or a prefix of it, as CUDA accepts."""
        if token == self.index:
            return True
        return bool(self.uuid and token.startswith("GPU-") and self.uuid.startswith(token))


def type_of(gpus: list[Gpu]) -> str:
    """The GPU type a stack on `gpus` serves: "cpu" with none."""
    return gpus[0].gpu_type if gpus else "cpu"


def gpu_type(name: str) -> str:
    """ "h100" for an "NVIDIA H100 80GB HBM3"."""
    name = name.strip().lower().removeprefix("nvidia ").replace("geforce ", "")
    return re.sub(r"[^a-z0-9]+", "-", name.split()[0]).strip("-") if name else "cuda"


def listed() -> list[Gpu]:
    """The host's NVIDIA GPUs as nvidia-smi lists them; none without nvidia-smi or a driver."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    done = subprocess.run(
        [exe, "--query-gpu=index,uuid,name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    )
    return parse_listing(done.stdout) if done.returncode == 0 else []


def parse_listing(text: str) -> list[Gpu]:
    """nvidia-smi's `index, uuid, name` lines, one GPU each."""
    gpus = []
    for line in text.splitlines():
        index, uuid, name = ([*line.split(",", 2), "", ""])[:3]
        if index.strip().isdigit() and uuid.strip().startswith("GPU-") and name.strip():
            gpus.append(Gpu(index.strip(), name.strip(), uuid.strip()))
    return gpus


def served(gpus: list[Gpu], env: Mapping[str, str]) -> list[Gpu]:
    """The GPUs a stack puts workers on (the module's docstring says how they are chosen); none
    on a host without GPUs, whose workers serve the cpu target."""
    if not gpus:
        return []
    asked, source = env.get("KERNELARENA_GPUS", "").strip(), "KERNELARENA_GPUS"
    if not asked:
        asked, source = env.get("CUDA_VISIBLE_DEVICES", "").strip(), "CUDA_VISIBLE_DEVICES"
    if not asked:
        return [gpu for gpu in gpus if gpu.gpu_type == gpus[0].gpu_type]
    chosen = []
    for token in (part.strip() for part in asked.split(",")):
        named = [gpu for gpu in gpus if gpu.named_by(token)]
        if len(named) != 1:
            known = ", ".join(gpu.index for gpu in gpus)
            raise GpuChoiceError(
                f"{source}={asked} names GPU {token!r}, which is not one GPU this host lists "
                f"(nvidia-smi lists {known}): name GPUs by those indices or their UUIDs"
            )
        chosen.append(named[0])
    types = sorted({gpu.gpu_type for gpu in chosen})
    if len(types) > 1:
        raise GpuChoiceError(
            f"{source}={asked} mixes GPU types ({', '.join(types)}): one stack serves one type; "
            "start a stack per type, each with its own KERNELARENA_GPUS"
        )
    return chosen


def cpu_shares(count: int, cpus: frozenset[int] | None = None) -> list[frozenset[int]]:
    """The cores of this process (`cpus`, default its affinity) dealt into `count` shares of
    consecutive cores, as even as they divide (neighbouring cores share caches); each share has
    at least one core, so a host of more GPUs than cores shares them round."""
    ordered = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if count <= 1:
        return [frozenset(ordered)]
    if len(ordered) < count:
        return [frozenset({ordered[i % len(ordered)]}) for i in range(count)]
    bounds = [len(ordered) * i // count for i in range(count + 1)]
    return [frozenset(ordered[bounds[i] : bounds[i + 1]]) for i in range(count)]
