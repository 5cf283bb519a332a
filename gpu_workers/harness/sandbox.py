"""The one sandbox runner: every step that runs user or agent code (or compiles it) is a fresh
subprocess with a scrubbed environment, no network where the OS allows it, rlimits, a wall-clock
timeout that kills the whole process group, the GPU pinned, and truncated output."""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpu_workers.harness import settings

# Variables a child may inherit; everything else (database and broker URLs, API keys, tokens)
# is dropped.
_INHERITED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TORCH_CUDA_ARCH_LIST",
)


@dataclass
class Limits:
    timeout_s: float = 300.0
    cpu_seconds: int = 900
    file_size_bytes: int = 4 << 30
    open_files: int = 4096
    processes: int = 4096
    output_bytes: int = 16_000


@dataclass
class SandboxResult:
    returncode: int | None
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    network_isolated: bool
    argv: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def failure(self) -> str | None:
        """A one-line reason a person can act on, or None when the child exited cleanly."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s (a hang or an infinite loop?)"
        if self.returncode is None or self.returncode == 0:
            return None
        if self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            hint = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed (out of memory?)"}
            return f"crashed with {name} ({hint.get(name, 'signal')})"
        if self.returncode == 3:  # sandbox_entry's code for an exception in user code
            return f"raised {last_line(self.stderr)}"
        return f"exited with status {self.returncode}: {last_line(self.stderr)}"


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


@functools.cache
def _network_prefix() -> tuple[str, ...]:
    """`unshare -n` gives the child an empty network namespace; probed once per process."""
    unshare = shutil.which("unshare")
    if not unshare:
        return ()
    for prefix in ((unshare, "-n", "--"), (unshare, "-rn", "--")):
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        if probe.returncode == 0:
            return prefix
    return ()


def network_isolation_available() -> bool:
    return bool(_network_prefix())


def child_env(device: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ}
    env["PYTHONPATH"] = str(settings.REPO_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["KERNELARENA_CACHE"] = str(settings.cache_dir())
    env["CUDA_VISIBLE_DEVICES"] = settings.gpu_index() if device == "cuda" else ""
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    env.update(extra or {})
    return env


def _apply_limits(limits: Limits) -> None:
    """Runs in the child between fork and exec."""
    for name, value in (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(name)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(name, (cap, hard))


def run(
    argv: list[str],
    *,
    cwd: Path,
    device: str,
    limits: Limits | None = None,
    env: dict[str, str] | None = None,
) -> SandboxResult:
    limits = limits or Limits()
    prefix = _network_prefix()
    full_argv = [*prefix, *argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            full_argv,
            cwd=cwd,
            env=child_env(device, env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=lambda: _apply_limits(limits),
        )
        timed_out = _wait(proc, limits.timeout_s)
        seconds = time.monotonic() - started
        return SandboxResult(
            returncode=None if timed_out else proc.returncode,
            timed_out=timed_out,
            seconds=seconds,
            stdout=_tail(out, limits.output_bytes),
            stderr=_tail(err, limits.output_bytes),
            network_isolated=bool(prefix),
            argv=full_argv,
        )


def _wait(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Waits for the child; on timeout kills its whole process group. True if it timed out."""
    try:
        proc.wait(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    # Grandchildren (compiler jobs, stray threads' processes) die with the group either way.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    return timed_out


def _tail(stream, limit: int) -> str:
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(max(0, size - limit))
    text = stream.read().decode("utf-8", "replace")
    if size > limit:
        text = f"[... {size - limit} bytes cut ...]\n" + text
    return text


def python_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def run_step(
    step: str, request: dict, workdir: Path, device: str, timeout_s: float
) -> tuple[dict, str | None]:
    """Runs one sandbox_entry step; returns its JSON result, or a one-line failure."""
    request_path = workdir / f"{step}-request.json"
    result_path = workdir / f"{step}-result.json"
    result_path.unlink(missing_ok=True)
    request_path.write_text(json.dumps(request))
    outcome = run(
        python_argv("gpu_workers.harness.sandbox_entry", step, str(request_path), str(result_path)),
        cwd=workdir,
        device=device,
        limits=Limits(timeout_s=timeout_s),
        # cpu: fresh allocations hold a garbage pattern, the host's stand-in for NaN-filling
        # free GPU memory (threat 2)
        env={"MALLOC_PERTURB_": "128"} if device == "cpu" else None,
    )
    if outcome.failure() or not result_path.is_file():
        reason = outcome.failure() or "the step ended without a result"
        return {}, f"{step}: {reason}"
    result = json.loads(result_path.read_text())
    return result, None


# ---- stand-in until the bubblewrap sandbox lands (replaced wholesale by it) ----


@dataclass(frozen=True)
class View:
    """What a confined process may see besides the system's read-only software."""

    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()


def confinement() -> dict:
    return {
        "confined": False,
        "mode": "unconfined",
        "tool": None,
        "network_isolated": network_isolation_available(),
    }


def start(argv, *, cwd, device, view, limits=None, env=None, pass_fds=(), stdout=None, stderr=None):
    limits = limits or Limits()
    return subprocess.Popen(
        [*_network_prefix(), *argv],
        cwd=cwd,
        env=child_env(device, env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        pass_fds=pass_fds,
        preexec_fn=lambda: _apply_limits(limits),
    )


def stop(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
