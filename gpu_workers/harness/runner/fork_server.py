"""The runner fork server, inside a sandbox: `python -m gpu_workers.harness.runner.fork_server FD`.

Starting a runner costs an interpreter and `import torch` (4-10 s on a GPU host); forking one from
a process that has already imported them costs milliseconds. This process imports what a runner
needs (never touching a device: CUDA is initialised by each runner, after the fork), then forks
one runner per `fork` command on the socket FD. Each forked runner is confined again before it
runs anything of a problem's or a candidate's (sandbox/nested.py): namespaces of its own, only
the folders its runner would have seen, no capabilities. Its process tree:

    fork server ── C1 (unshares the namespaces, mounts; waits)
                     └── C2 (pid 1 of the new pid namespace: mounts its /proc, reaps, exits with
                           │  the runner's status)
                           └── C3 (the runner, capabilities dropped: runner.main, its socket and
                                   log passed as FDs)

The judge stops a runner by killing C1 and C2 (killing C2 ends its whole pid namespace); a runner
killed by signal N ends C1 with status 128 + N, as bubblewrap's init reports it.

The server's own messages: the first, sent unasked once it is ready, says whether nested
confinement works here ({"nested": bool, "why": str | None}); then `fork` ({"role", "cwd",
"keep", "cover", "tmp_bytes"} with FDs [socket, log]) answers {"pid": C1's pid in the server's
namespace}, and `exit_status` ({"pid", "timeout_s"}) answers {"status": int | None}.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import traceback

import torch

from gpu_workers.harness.judge import timing  # binds the clocks before user code (threat 6)
from gpu_workers.harness.judge.channel import Channel, RunnerGone
from gpu_workers.harness.runner import candidate_side
from gpu_workers.harness.runner import main as runner_main
from gpu_workers.harness.runner.state import RunnerState
from gpu_workers.harness.sandbox import nested

EXIT_SETUP_FAILED = 70  # C1 could not confine the runner: the harness's failure
RUNNER_THREADS = "KERNELARENA_RUNNER_THREADS"  # a runner's OpenMP threads (judge/fork_server.py)


def main(argv: list[str]) -> int:
    channel = Channel.from_fd(int(argv[0]))
    nested.stay_undumpable()
    _warm_up()
    why = _probe()
    channel.send({"nested": why is None, "why": why})
    exits: dict[int, int] = {}
    while True:
        try:
            message, fds = channel.receive()
        except RunnerGone:
            return 0
        _reap(exits)
        command = message.get("command")
        if command == "quit":
            return 0
        if command == "fork":
            reply = {"pid": _fork(channel, message, fds)}
        elif command == "exit_status":
            reply = {"status": _exit_status(exits, message["pid"], message["timeout_s"])}
        else:
            reply = {"error": f"unknown command {command!r}"}
        channel.send(reply)


def _warm_up() -> None:
    """A candidate's `prepare` here, once, so forked runners start past its one-time costs."""
    candidate_side.prepare(RunnerState("candidate"), {}, [])


def _probe() -> str | None:
    """Why a forked runner could not be confined here, or None: a child goes through the whole
    confinement and exits. A server with threads would fork them half-copied, so it says so."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        return f"the fork server holds {threads} threads after its imports"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            nested.enter(keep=[os.getcwd()], cover=[], tmp_bytes=1 << 20)
            # Threads (the driver's) are made only in the new pid namespace: a process that
            # unshared it may no longer start one, so the check runs in a child, as a runner does.
            inner = os.fork()
            if inner == 0:
                try:
                    nested.mount_proc()
                    nested.drop_privileges()
                    _driver_answers()
                    os._exit(0)
                except BaseException as exc:  # noqa: BLE001 - the reason goes to the server
                    os.write(write, f"{type(exc).__name__}: {exc}".encode()[:500])
                    os._exit(1)
            os._exit(_status_of(os.waitpid(inner, 0)[1]))
        except BaseException as exc:  # noqa: BLE001 - the reason goes back to the server
            os.write(write, f"{type(exc).__name__}: {exc}".encode()[:500])
            os._exit(1)
    os.close(write)
    reason = b""
    while chunk := os.read(read, 512):
        reason += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return reason.decode(errors="replace") or f"the probe exited with {status}"


def _driver_answers() -> None:
    """On a GPU host, the CUDA driver initialises in the nested namespaces (cuInit makes no
    context: nothing touches the device before a runner's step)."""
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return  # the cpu target hides every device
    driver = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_int()
    if (error := driver.cuInit(0)) != 0:
        raise OSError(f"cuInit failed with CUDA error {error}")
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        raise OSError("the CUDA driver sees no device")


def _fork(channel: Channel, message: dict, fds: list[int]) -> int:
    sock_fd, log_fd = fds
    pid = os.fork()
    if pid == 0:
        code = EXIT_SETUP_FAILED
        try:
            channel.sock.close()  # the server's line to the judge is not the runner's
            os.setsid()
            nested.die_with_parent()
            nested.enter(message["keep"], message["cover"], message["tmp_bytes"])
            code = _init(message, sock_fd, log_fd)
        except BaseException:  # noqa: BLE001 - said in the runner's log, then C1 exits
            os.write(log_fd, traceback.format_exc().encode()[-2000:])
        os._exit(code)
    os.close(sock_fd)
    os.close(log_fd)
    return pid


def _init(message: dict, sock_fd: int, log_fd: int) -> int:
    """C1: forks the new pid namespace's init (C2), which forks the runner (C3); returns C2's
    exit status."""
    init = os.fork()
    if init == 0:
        nested.die_with_parent()
        nested.mount_proc()
        runner = os.fork()
        if runner == 0:
            nested.die_with_parent()
            nested.drop_privileges()
            _restore_threads()
            os.chdir(message["cwd"])
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(log_fd)
            os._exit(_run(message["role"], sock_fd))
        os.close(sock_fd)
        os.close(log_fd)
        os._exit(_status_of(_wait_for(runner)))
    os.close(sock_fd)
    os.close(log_fd)
    _, status = os.waitpid(init, 0)
    return _status_of(status)


def _restore_threads() -> None:
    """The server ran with one OpenMP thread (a pool made before a fork is half-copied into the
    child); a runner gets the count a started one would have had."""
    threads = os.environ.pop(RUNNER_THREADS, None)
    if threads:
        os.environ["OMP_NUM_THREADS"] = threads
        torch.set_num_threads(int(threads))


def _run(role: str, sock_fd: int) -> int:
    # what a started runner's command line says (python -m gpu_workers.harness.runner.main)
    sys.argv = [runner_main.__file__, role, str(sock_fd)]
    try:
        code = runner_main.main([role, str(sock_fd)])
    except SystemExit as leaving:  # candidate code may call sys.exit
        code = leaving.code if isinstance(leaving.code, int) else 1
    except BaseException:  # noqa: BLE001 - as an interpreter would: the trace, status 1
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _wait_for(runner: int) -> int:
    """C2, the pid namespace's init, reaps every orphan until the runner itself ends."""
    while True:
        pid, status = os.wait()
        if pid == runner:
            return status


def _status_of(status: int) -> int:
    """A wait status as an exit code, a signal N as 128 + N (an exit code cannot be negative)."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _reap(exits: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exits[pid] = os.waitstatus_to_exitcode(status)


def _exit_status(exits: dict[int, int], pid: int, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while pid not in exits and time.monotonic() < deadline:
        _reap(exits)
        time.sleep(0.002)
    return exits.pop(pid, None)


if __name__ == "__main__":
    _ = timing
    sys.exit(main(sys.argv[1:]))
