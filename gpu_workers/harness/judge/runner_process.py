"""The judge's handle on one runner: a sandboxed `gpu_workers.harness.runner.main` process and the
socket to it. Whatever the process does (raises, exits, hangs, answers nonsense) becomes a
RunnerFailed (its code raised) or a RunnerDied (it is gone), never a crash of the judge."""

from __future__ import annotations

import shutil
import signal
import socket
import time
from pathlib import Path

from gpu_workers.harness.judge import compiler_seed, runner_replies
from gpu_workers.harness.judge.channel import NO_ANSWER, Channel, RunnerGone
from gpu_workers.harness.judge.fork_server import ForkServer, ForkServerFailed, end_process
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.sandbox.child_output import OutputTail, readable
from gpu_workers.harness.sandbox.freezer import Census, Freezer, NotStopped

# cpu: fresh allocations hold a garbage pattern, the host's stand-in for NaN-filling free GPU
# memory (threat 2). One thread per runner: a parallel region waits for its slowest thread, so
# on a shared host every neighbour's burst showed up in the times (drift of 2-3x on 2 cores);
# eager, torch.compile and the candidate all race single-threaded.
_CPU_ENV = {"MALLOC_PERTURB_": "128", "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
_LOG_BYTES = 64_000


def runner_limits(timeout_s: float) -> sandbox.Limits:
    # a runner lives for many calls: the judge's per-call timeout is the hang guard
    return sandbox.Limits(timeout_s=timeout_s, cpu_seconds=3600)


def runner_env(device: str) -> dict | None:
    return _CPU_ENV if device == "cpu" else None


def start_fork_server(device: str, view: sandbox.View, cwd: Path, timeout_s: float) -> ForkServer:
    """A fork server for runners that see parts of `view`, started in the background, with the
    environment and limits a started runner gets."""
    return ForkServer(device, view, cwd, runner_env(device), runner_limits(timeout_s))


# The role of an error that is the harness's own: a candidate process that died before any
# candidate code ran in it (failure.of_runner_error makes it an infrastructure failure).
HARNESS = "harness"


class RunnerError(Exception):
    def __init__(self, role: str, message: str):
        super().__init__(message)
        self.role = role


class RunnerFailed(RunnerError):
    """The runner's user code raised; the message says where."""


class RunnerDied(RunnerError):
    """The runner's process ended, broke the protocol or stopped answering."""


class RunnerProcess:
    """With `frozen`, the runner's whole sandbox is stopped whenever it is not answering a
    command (sandbox.freezer): it runs only while the judge waits on it."""

    def __init__(
        self,
        role: str,
        device: str,
        view: sandbox.View,
        cwd: Path,
        timeout_s: float,
        frozen: bool = False,
        server: ForkServer | None = None,
    ):
        """With `server`, the process is forked from that fork server (milliseconds) instead
        of started (seconds); it sees `view` either way."""
        self.role = role
        self.timeout_s = timeout_s
        self._timeout_why = "a hang or an infinite loop?"
        self.last_wall_ms = 0.0  # the judge's clock around the last command's send and reply
        self.census: Census | None = None  # what the stopped sandbox held after the last reply
        self.warm_census: Census | None = None
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # its stdout and stderr, in the worker's memory: a runner that prints without end fills
        # nothing of the host's
        self._log = OutputTail(_LOG_BYTES)
        try:
            if server is not None:
                self.proc = _forked(server, role, view, cwd, child.fileno(), self._log.write_fd)
            else:
                self.proc = sandbox.start(
                    sandbox.python_argv(
                        "gpu_workers.harness.runner.main", role, str(child.fileno())
                    ),
                    cwd=cwd,
                    device=device,
                    view=view,
                    limits=runner_limits(timeout_s),
                    env=runner_env(device),
                    pass_fds=(child.fileno(),),
                    stdout=self._log.write_fd,
                    stderr=self._log.write_fd,
                )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
            self._log.child_started()
        self.channel = Channel(parent)
        self.forked = server is not None
        self._closed = False
        self._asked: tuple[str, dict] | None = None  # a command sent by `ask`, not yet answered
        self.stage: Path | None = None  # a candidate's folder for its extension (prepare_candidate)
        self._freezer = Freezer(sandbox.root_pid(self.proc)) if frozen else None

    def call(self, command: str, fds: list[int] | tuple[int, ...] = (), timeout_s=None, **fields):
        self.settle()
        if self._freezer:
            self._freezer.thaw()
        try:
            started = time.perf_counter()
            self.channel.send({"command": command, **fields}, fds)
            reply, received = self.channel.receive(timeout_s or self.timeout_s)
            self.last_wall_ms = (time.perf_counter() - started) * 1e3
        except RunnerGone as gone:
            raise RunnerDied(self.role, self._why(str(gone))) from None
        return self._read_reply(command, fields, reply, received)

    def bound_calls(self, timeout_s: float, why: str) -> None:
        """From now on each command must be answered within `timeout_s`; a timeout says `why`."""
        self.timeout_s = timeout_s
        self._timeout_why = why

    def ask(self, command: str, **fields) -> None:
        """Sends a command without waiting for it: the runner works on it while the judge does
        something else, and `settle` (which the next `call` runs first) reads its reply."""
        try:
            self.channel.send({"command": command, **fields})
        except RunnerGone as gone:
            raise RunnerDied(self.role, self._why(str(gone))) from None
        self._asked = (command, fields)

    def settle(self) -> None:
        """Waits for the reply to the command `ask` sent, if any, and checks it like a call's."""
        if self._asked is None:
            return
        (command, fields), self._asked = self._asked, None
        try:
            reply, received = self.channel.receive(self.timeout_s)
        except RunnerGone as gone:
            raise RunnerDied(self.role, self._why(str(gone))) from None
        self._read_reply(command, fields, reply, received)

    def _read_reply(self, command: str, fields: dict, reply: dict, received: list[int]) -> dict:
        self._freeze()
        for fd in received:  # a runner is never trusted with handing the judge memory
            _close(fd)
        try:
            runner_replies.check(command, fields, reply)
        except runner_replies.BadReply as bad:  # its own code rewrote the reply: it is done
            sandbox.stop(self.proc)
            why = f"the {self.role} process broke the protocol (reply to {command}: {bad})"
            raise RunnerDied(self.role, why) from None
        if "error" in reply:
            raise RunnerFailed(self.role, "raised " + str(reply["error"])[:600])
        return reply

    def _freeze(self) -> None:
        if not self._freezer:
            return
        try:
            self.census = self._freezer.freeze()
        except NotStopped as stuck:
            sandbox.stop(self.proc)
            raise RunnerDied(self.role, f"the {self.role} process {stuck}") from None

    def mark_warm(self) -> None:
        """What the sandbox holds now (thread pools made by a first call included) is what it
        may hold from here on."""
        self.warm_census = self.census

    def gained_since_warm(self) -> str | None:
        """Processes or threads the stopped sandbox holds beyond its warm census, in words."""
        if self.census is None or self.warm_census is None:
            return None
        return self.census.grew_from(self.warm_census)

    def _why(self, what: str) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - still running: it hung or broke the protocol
            sandbox.stop(self.proc)
            if what == NO_ANSWER:
                return (
                    f"the {self.role} process timed out after {self.timeout_s:.0f} s "
                    f"({self._timeout_why})"
                )
            return f"the {self.role} process broke the protocol ({what})"
        self._log.finish()
        limit = sandbox.killed_at_process_limit(self.proc)
        if limit is not None:
            return f"the {self.role} process was killed for starting more than {limit} processes"
        code = sandbox.exit_status(code, sandbox.confinement()["confined"])
        if code < 0:
            return f"the {self.role} process was killed by {signal.Signals(-code).name}"
        tail = self.output_tail()
        return f"the {self.role} process exited with status {code}" + (f": {tail}" if tail else "")

    def output_tail(self, limit: int = 600) -> str:
        text = readable(self._log.data()).strip()
        return sandbox.last_line(text)[:limit] if text else ""

    def close(self) -> None:
        if self._closed:
            return  # its process group id may already belong to another process
        self._closed = True
        end_process(self.channel, self.proc, self._log)

    def __enter__(self) -> RunnerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _forked(server: ForkServer, role: str, view, cwd: Path, sock_fd: int, log_fd: int):
    try:
        return server.fork(role, view, cwd, sock_fd, log_fd)
    except ForkServerFailed as failed:  # no code of the problem's or candidate's ran
        raise RunnerDied(HARNESS, str(failed)) from None


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass


def begin_reference(
    problem_path: Path,
    device: str,
    timeout_s: float = 600,
    server: ForkServer | None = None,
    compiles: bool = False,
):
    """A reference runner starting up (its interpreter, torch, the harness; torch.compile's
    modules too where it `compiles`, for the baselines) while the judge does other work;
    `load_reference` gives it the problem. It sees the problem's own folder and nothing of any
    candidate's: give it a folder holding model.py alone. With `server`, forked from it (a
    ForkServer whose view holds that folder). It sees the machine's compiler seed too, where
    there is one (built first where it `compiles` and there is none; compiler_seed.py)."""
    folder = problem_path.parent
    seed = compiler_seed.ensure(device) if compiles else compiler_seed.ready(device)
    if seed is not None and server is not None and seed not in server.view.readable:
        seed = None  # the server started before the seed was built: a forked runner cannot see it
    view = sandbox.View(readable=(folder,) if seed is None else (folder, seed))
    runner = RunnerProcess("reference", device, view, folder, timeout_s, server=server)
    try:
        # answered once it is up, its device's context made: `settle` waits for that
        runner.ask(
            "prepare",
            device=device,
            compiles=compiles,
            compiler_seed=None if seed is None else str(seed),
        )
    except BaseException:
        runner.close()
        raise
    return runner


def load_reference(runner: RunnerProcess, problem_path: Path, device: str, protocol):
    """The problem loaded in a started reference runner (its device's context made here)."""
    try:
        runner.call(
            "load", problem=str(problem_path), device=device, protocol=protocol.to_request()
        )
    except BaseException:  # its code failed, or the task's time limit came while it loaded
        runner.close()
        raise
    return runner


def start_reference(
    problem_path: Path, device: str, protocol, timeout_s: float = 600, compiles: bool = False
):
    """A reference runner with the problem loaded."""
    runner = begin_reference(problem_path, device, timeout_s, compiles=compiles)
    return load_reference(runner, problem_path, device, protocol)


def prepare_candidate(
    workspace: Path, stage: Path, device: str, timeout_s: float, server: ForkServer | None = None
):
    """A fresh candidate runner that gets ready (imports, the first use of the judge's checks;
    not the device) while the judge does other work, before any candidate code exists: it
    sees the workspace and `stage`, an empty folder of its own where `load_candidate` puts the
    extension it is to run. One process per candidate still: it is loaded once, then stopped.
    With `server`, forked from it (a ForkServer whose view holds both folders)."""
    view = sandbox.View(readable=(workspace, stage))
    runner = RunnerProcess(
        "candidate", device, view, workspace, timeout_s, frozen=True, server=server
    )
    runner.stage = stage
    try:
        runner.ask("prepare")
    except BaseException:
        runner.close()
        raise
    return runner


def load_candidate(
    runner: RunnerProcess, extension_dir: str, workspace: Path, device: str, protocol
):
    """ModelNew loaded in a prepared runner, from a copy of the extension in its stage folder."""
    stage = runner.stage
    if Path(extension_dir) != stage:
        for built in Path(extension_dir).iterdir():
            shutil.copyfile(built, stage / built.name)
    try:
        _claim_device(runner, device)
        runner.call(
            "load",
            workspace=str(workspace),
            extension_dir=str(stage),
            device=device,
            # the candidate gets the arithmetic rules, never a seed
            protocol={**protocol.to_request(), "secret_seeds": [], "public_seeds": []},
        )
    except BaseException:  # its code failed, or the task's time limit came while it loaded
        runner.close()
        raise
    return runner


def _claim_device(runner: RunnerProcess, device: str) -> None:
    """The process's first use of the device, before any candidate code ran in it: its failure
    (a device full of the runs sharing it, or a process that could not get ready) is the
    harness's, never blamed on the candidate (failure.of_runner_error)."""
    try:
        runner.call("claim_device", device=device)
    except RunnerError as failed:
        why = f"the candidate's process could not use the {device} device: {failed}"
        raise type(failed)(HARNESS, why) from None


def start_candidate(workspace: Path, extension_dir: str, device: str, protocol, timeout_s: float):
    """A fresh candidate runner with ModelNew loaded: it sees the workspace and its extension."""
    runner = prepare_candidate(workspace, Path(extension_dir), device, timeout_s)
    return load_candidate(runner, extension_dir, workspace, device, protocol)
