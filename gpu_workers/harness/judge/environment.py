"""The environment a measurement was taken in: GPU, driver, CUDA, torch, clocks, temperature.

Read by the trusted parent (never inside a candidate's process) through nvidia-smi, so a candidate
cannot forge it.
"""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess

_GPU_FIELDS = (
    "name",
    "driver_version",
    "compute_cap",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
)


def _nvidia_smi(fields: tuple[str, ...], index: str) -> dict[str, str] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [
                exe,
                f"--query-gpu={','.join(fields)}",
                "--format=csv,noheader,nounits",
                f"-i={index}",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    values = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(fields, values, strict=False))


@functools.cache
def compute_capability(index: str = "0") -> str | None:
    """'9.0' on an H100, or None when no GPU is visible."""
    info = _nvidia_smi(("compute_cap",), index)
    return info["compute_cap"] if info else None


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(device: str, index: str = "0") -> dict:
    import torch

    env = {
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": cpu_name(),
    }
    if device == "cuda":
        info = _nvidia_smi(_GPU_FIELDS, index) or {}
        env.update(
            gpu=info.get("name"),
            driver=info.get("driver_version"),
            compute_capability=info.get("compute_cap"),
            clocks={
                "sm_mhz": info.get("clocks.sm"),
                "mem_mhz": info.get("clocks.mem"),
                "max_sm_mhz": info.get("clocks.max.sm"),
                "temperature_c": info.get("temperature.gpu"),
                "power_w": info.get("power.draw"),
            },
        )
    else:
        env.update(gpu=None, driver=None, clocks=None)
    return env


@functools.cache
def device_name(device: str, index: str = "0") -> str:
    """The key baselines and peaks are cached under: the GPU model, or the host CPU."""
    if device == "cuda":
        info = _nvidia_smi(("name",), index)
        return info["name"] if info else "unknown-gpu"
    return cpu_name()
