"""The speed-of-light floor: max(FLOPs / peak FLOP/s, bytes / peak bandwidth), with the peaks
measured on this device (not datasheets) once and cached per device and torch version."""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.judge import environment, gpu_lock
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.sandbox import launch as sandbox


@dataclass
class Peaks:
    device: str
    bandwidth_gbs: float  # bytes read + written per second by a large device copy
    fp32_tflops: float  # matmul with TF32 off
    tensor_tflops: float  # bf16 tensor-core matmul (fp32 on the cpu target)


def floor_ms(flops: int, nbytes: int, peaks: Peaks, protocol: Protocol) -> float:
    rate = peaks.tensor_tflops if protocol.allow_tensor_cores else peaks.fp32_tflops
    compute_ms = flops / (rate * 1e12) * 1e3
    memory_ms = nbytes / (peaks.bandwidth_gbs * 1e9) * 1e3
    return max(compute_ms, memory_ms)


def peaks_file(device: str) -> Path:
    """Where this machine's measured peaks are kept (measured once, on first use)."""
    import torch

    slug = re.sub(r"[^A-Za-z0-9]+", "-", environment.device_name(device, settings.gpu_index()))
    return settings.cache_dir() / "peaks" / f"{slug}-torch{torch.__version__}.json"


def peaks(device: str, measure_again: bool = False) -> Peaks:
    """This machine's peaks, measured on first use. A device busy with other work while they
    are measured makes them too low, never too high (the host's other processes on the cpu
    target, other runs on a GPU), so `measure_again` measures once more, alone on the device
    (the caller holds no lock), and keeps the higher of each: what a kernel that seems faster
    than the device is judged against before it is held. On a GPU, peaks measured alone within
    the last hour are not measured again: the lock kept every other measurement off the device,
    so another 10 s under it (a process, a context, 5 s of timing) would find the same."""
    path = peaks_file(device)
    if not path.is_file():
        # never over peaks another process published while these were measured (perhaps alone,
        # under the lock: tests/gpu once measured alone twice because this write replaced them)
        settings.publish_json(path, _measure(device), replace=False)
    elif measure_again and not _measured_alone_lately(path, device):
        with gpu_lock.hold(device, "the device's peaks"):  # alone on the device
            if not _measured_alone_lately(path, device):  # or done while this one waited
                measured = _measure(device)
                known = json.loads(path.read_text())
                measured.update({k: max(measured[k], known[k]) for k in _PEAK_FIELDS})
                settings.publish_json(path, {**measured, "alone_at": time.time()})
    data = json.loads(path.read_text())
    return Peaks(**{k: data[k] for k in asdict(Peaks("", 0, 0, 0))})


# How long peaks measured alone stand, per target: on the cpu target the lock keeps the host's
# other processes off no core, so a measurement there is never known to have been alone.
ALONE_STANDS_S = {"cpu": 0.0, "cuda": 3600.0}


def _measured_alone_lately(path: Path, device: str) -> bool:
    alone_at = json.loads(path.read_text()).get("alone_at")
    return alone_at is not None and time.time() - alone_at < ALONE_STANDS_S[device]


_PEAK_FIELDS = ("bandwidth_gbs", "fp32_tflops", "tensor_tflops")


def _measure(device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result, failure = sandbox.run_step(
            "peaks", {"device": device}, Path(tmp), device, 600, view=sandbox.View()
        )
    if failure:
        raise RuntimeError(f"measuring peaks failed: {failure}")
    return result


def measure_in_child(request: dict) -> dict:
    import torch

    from gpu_workers.harness.judge import timing

    device = request["device"]
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_n = (1 << 28) if device == "cuda" else (1 << 25)  # fp32 elements: 1 GiB / 128 MiB
    src = torch.empty(copy_n, device=device).uniform_()
    dst = torch.empty_like(src)
    n = 8192 if device == "cuda" else 1024
    a32, b32 = (torch.randn(n, n, device=device) for _ in range(2))
    fns = {"copy": lambda: dst.copy_(src), "fp32": lambda: a32 @ b32}
    if device == "cuda":
        a16, b16 = a32.bfloat16(), b32.bfloat16()
        fns["bf16"] = lambda: a16 @ b16
    timings, _ = timing.measure(fns, [()], device=device, budget_s=5.0, min_rounds=5)
    best = {name: min(t.times_ms) for name, t in timings.items()}
    flops = 2 * n**3
    fp32 = flops / (best["fp32"] * 1e-3) / 1e12
    return {
        "device": environment.device_name(device, settings.gpu_index()),
        "bandwidth_gbs": 2 * src.numel() * 4 / (best["copy"] * 1e-3) / 1e9,
        "fp32_tflops": fp32,
        "tensor_tflops": flops / (best["bf16"] * 1e-3) / 1e12 if "bf16" in best else fp32,
    }
