"""The program a runner runs, inside the sandbox: `python -m gpu_workers.harness.runner.main
ROLE FD`.

A runner executes untrusted code for the judge and nothing else: the *reference* runner the
problem's Model, the *candidate* runner the candidate's ModelNew. It answers one command at a
time on the socket FD (gpu_workers.harness.judge.channel) and works on buffers the judge lends it
(gpu_workers.harness.judge.shared_buffers). It decides nothing: the judge holds the seeds' purpose,
the references, the tolerances and the clock, and reads everything a runner says as a claim.
The clocks are bound before any user code is imported (gpu_workers.harness.judge.timing).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from gpu_workers.harness.judge import timing  # binds the clocks before user code (threat 6)
from gpu_workers.harness.judge.channel import Channel, RunnerGone
from gpu_workers.harness.runner import candidate_side, reference_side
from gpu_workers.harness.runner.state import RunnerState

ROLES = {"reference": reference_side.COMMANDS, "candidate": candidate_side.COMMANDS}


def main(argv: list[str]) -> int:
    role, fd = argv[0], int(argv[1])
    commands = ROLES[role]
    channel = Channel.from_fd(fd)
    state = RunnerState(role)
    while True:
        try:
            message, fds = channel.receive()
        except RunnerGone:
            return 0  # the judge is gone: nothing left to do
        command = message.get("command")
        if command == "quit":
            return 0
        try:
            reply = commands[command](state, message, fds)
        except Exception as exc:  # noqa: BLE001 - user code may raise anything; say it plainly
            reply = {"error": describe_exception(exc)}
        channel.send(reply or {})


def describe_exception(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if Path(f.filename).name in ("model.py", "model_new.py")]
    where = f"{Path(user[-1].filename).name}:{user[-1].lineno}" if user else "harness"
    return f"{type(exc).__name__} at {where}: {str(exc)[:500]}"


if __name__ == "__main__":
    _ = timing
    sys.exit(main(sys.argv[1:]))
