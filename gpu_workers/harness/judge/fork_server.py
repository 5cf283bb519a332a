"""The judge's handle on a runner fork server (runner/fork_server.py): one sandboxed process per
session that has imported torch and the runner, from which each runner process is forked in
milliseconds instead of started in seconds. A forked runner is confined as a started one is
(sandbox/nested.py) and is handled through a ForkedProcess, which stands where a started
process's Popen does (sandbox.stop, RunnerProcess).

Nothing here trusts the forked runner: its host pid is found from the server's answer (which
only harness code writes) and /proc, its exit status comes from the server, and it is stopped by
killing its namespace's init.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import threading
from pathlib import Path

from gpu_workers.harness.judge.channel import Channel, RunnerGone
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.sandbox.census import ProcessWatch, descendants
from gpu_workers.harness.sandbox.child_output import OutputTail

_LOG_BYTES = 16_000
# A fork server keeps CAP_SYS_ADMIN in bubblewrap's user namespace, to make each runner's
# namespaces and mounts (sandbox/nested.py), and CAP_SETPCAP, to empty a runner's bounding set;
# forked runners drop every capability before any code of the problem's or the candidate's runs.
_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETPCAP")
_ANSWER_S = 30.0  # a fork or a status is milliseconds of the server's work
_RUNNER_THREADS = "KERNELARENA_RUNNER_THREADS"  # read by runner/fork_server.py


class ForkServerFailed(Exception):
    """The server is gone or cannot confine what it forks: start runners afresh instead."""


class ForkServer:
    """Started in the background; `ready` waits for its imports. `view` is every folder a runner
    forked from it may see; each runner keeps the folders of its own view and sees the rest
    covered."""

    def __init__(self, device: str, view: sandbox.View, cwd: Path, env: dict | None, limits):
        self.view = view
        self.limits = limits
        self._lock = threading.Lock()
        self._nested: bool | None = None
        self.why: str | None = None
        self.broken = False  # it stopped answering or refused: fork no more from it
        # OpenMP's threads would be forked half-copied: the server imports with one, and each
        # runner sets the count it would have started with (runner/fork_server.py).
        threads = sandbox.child_env(device, env)["OMP_NUM_THREADS"]
        env = {**(env or {}), "OMP_NUM_THREADS": "1", _RUNNER_THREADS: threads}
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._log = OutputTail(_LOG_BYTES)
        try:
            self.proc = sandbox.start(
                sandbox.python_argv("gpu_workers.harness.runner.fork_server", str(child.fileno())),
                cwd=cwd,
                device=device,
                view=view,
                limits=limits,
                env=env,
                pass_fds=(child.fileno(),),
                stdout=self._log.write_fd,
                stderr=self._log.write_fd,
                capabilities=_CAPABILITIES,
            )
        finally:
            child.close()
            self._log.child_started()
        self.channel = Channel(parent)

    def answered(self) -> bool:
        """Whether the server has said it is ready (without waiting)."""
        if self._nested is None:
            readable, _, _ = select.select([self.channel.sock], [], [], 0)
            if not readable:
                return False
            self.ready(_ANSWER_S)
        return True

    def ready(self, timeout_s: float) -> None:
        """Waits for the server's imports; raises ForkServerFailed where it cannot fork
        confined runners."""
        with self._lock:
            if self._nested is None:
                try:
                    hello, _ = self.channel.receive(timeout_s)
                except RunnerGone as gone:
                    self._nested, self.why = False, f"the fork server did not start: {gone}"
                else:
                    self._nested = hello.get("nested") is True
                    self.why = None if self._nested else str(hello.get("why"))[:500]
        if not self._nested:
            raise ForkServerFailed(self.why or "the fork server cannot confine runners here")

    def fork(self, role: str, view: sandbox.View, cwd: Path, sock_fd: int, log_fd: int):
        """A runner of `role` that sees `view` (within the server's), its socket and log passed
        as descriptors; a ForkedProcess."""
        keep = [str(path) for path in view.readable]
        shown = [str(path) for path in self.view.readable]
        inside = all(any(sandbox.within(p, s) for s in self.view.readable) for p in view.readable)
        if view.writable or not inside:
            raise ValueError(f"a forked runner sees part of its server's view, not {view}")
        request = {
            "command": "fork",
            "role": role,
            "cwd": str(cwd),
            "keep": keep,
            "cover": [path for path in shown if path not in keep],
            "tmp_bytes": self.limits.tmp_bytes,
        }
        with self._lock:
            inner = self._ask(request, [sock_fd, log_fd])["pid"]
            host = _host_pid(sandbox.root_pid(self.proc), inner)
        return ForkedProcess(self, inner, host, self.limits.processes)

    def exit_status(self, inner: int, timeout_s: float) -> int | None:
        with self._lock:
            return self._ask({"command": "exit_status", "pid": inner, "timeout_s": timeout_s})[
                "status"
            ]

    def _ask(self, request: dict, fds: list[int] | None = None) -> dict:
        try:
            self.channel.send(request, fds or [])
            reply, received = self.channel.receive(_ANSWER_S + request.get("timeout_s", 0))
        except RunnerGone as gone:
            self.broken = True
            raise ForkServerFailed(f"the fork server stopped answering ({gone})") from None
        for fd in received:
            os.close(fd)
        if "error" in reply:
            self.broken = True
            raise ForkServerFailed(f"the fork server refused: {reply['error']}")
        return reply

    def close(self) -> None:
        end_process(self.channel, self.proc, self._log)


def end_process(channel: Channel, proc, log: OutputTail) -> None:
    """A sandboxed process on a line asked to quit, then stopped with all it started, and the
    line and its log closed (a runner's or a fork server's)."""
    try:
        channel.send({"command": "quit"})
    except RunnerGone:
        pass
    channel.close()
    sandbox.stop(proc)
    log.finish()


def _host_pid(server_root: int, inner: int) -> int:
    """The host pid of the server's child `inner` (a pid in the server's namespace): the
    process below the server's sandbox whose last namespace pid is `inner`, at the server's
    namespace depth."""
    depth = len(_namespace_pids(server_root))
    for pid in descendants(server_root):
        chain = _namespace_pids(pid)
        if len(chain) == depth and chain[-1] == inner:
            return pid
    raise ForkServerFailed(f"the forked runner {inner} is not below its server")


def _namespace_pids(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return [int(field) for field in line.split()[1:]]
    except OSError:
        pass
    return []


class ForkedProcess:
    """A runner forked by a ForkServer, handled as sandbox.start's Popen is: `pid` and
    `sandbox_init_pid` are C1's host pid (the root of what the freezer stops and the process
    watch counts), `sandbox_init` a pidfd of it, `wait` and `returncode` its exit status as the
    server reaped it."""

    def __init__(self, server: ForkServer, inner: int, host: int, limit: int):
        self._server = server
        self._inner = inner
        self.pid = self.sandbox_init_pid = host
        self.args = ["fork server", str(inner)]
        self.returncode: int | None = None
        self.sandbox_init = os.pidfd_open(host)  # readable once it exited; closed by `stop`
        if _namespace_pids(host)[-1:] != [inner]:  # gone and reused before the pidfd opened
            os.close(self.sandbox_init)
            raise ForkServerFailed(f"the forked runner {inner} ended at once")
        self.process_watch = ProcessWatch(host, self.sandbox_init, limit)

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        readable, _, _ = select.select([self.sandbox_init], [], [], timeout)
        if not readable:
            raise subprocess.TimeoutExpired(self.args, timeout)
        try:
            status = self._server.exit_status(self._inner, 5.0)
        except ForkServerFailed:
            status = None
        self.returncode = -signal.SIGKILL if status is None else status
        return self.returncode

    def stop(self) -> int:
        """sandbox.stop for a forked runner: C1, then every process below it killed (C2's end
        ends its pid namespace), waiting until each has exited."""
        if self.sandbox_init is None:
            return self.wait()
        self.process_watch.stop()
        below = []
        for pid in descendants(self.pid)[1:]:
            try:
                below.append(os.pidfd_open(pid))
            except OSError:
                pass
        for fd in [self.sandbox_init, *below]:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for fd in below:
            select.select([fd], [], [], 30)
            os.close(fd)
        status = self.wait()
        os.close(self.sandbox_init)
        self.sandbox_init = None
        return status
