"""Keeps the processes of the one-command run (webapp/serve.py) alive, and stops them together.

A service marked `restarts` (a Celery worker) that dies is started again after a back-off
(1 s, 2 s, 4 s ... at most 30 s; back to 1 s once it stayed up a minute), and the log says how
it died. The others (the web server, the broker) are the stack itself: when one of them dies
the whole stack stops with a message and exit status 1, for whatever runs it (a terminal,
systemd, Docker's restart policy) to see. SIGINT and SIGTERM stop every service, the workers
first and together (they still need the broker to hand back their tasks), and wait for them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from webapp import child_process

POLL_S = 0.5
STOP_TIMEOUT_S = 20.0


@dataclass
class Backoff:
    """The delay before restarting a service that died, by how long it had stayed up."""

    first_s: float = 1.0
    cap_s: float = 30.0
    stable_after_s: float = 60.0
    deaths: int = 0  # in a row, each after less than stable_after_s

    def delay_after(self, uptime_s: float) -> float:
        if uptime_s >= self.stable_after_s:
            self.deaths = 0
        delay = min(self.cap_s, self.first_s * 2**self.deaths)
        self.deaths += 1
        return delay


@dataclass
class Service:
    name: str
    launch: Callable[[], subprocess.Popen]
    restarts: bool
    backoff: Backoff = field(default_factory=Backoff)
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_at: float | None = None


class Supervisor:
    def __init__(self, stop_timeout_s: float | None = None) -> None:
        """stop_timeout_s: how long the workers get together to finish their tasks when the
        stack stops (STOP_TIMEOUT_S where None); a task still running then is killed, and sent
        again when a worker next starts (gpu_workers/waiting_work.py)."""
        self.stop_timeout_s = stop_timeout_s
        self.services: list[Service] = []
        self.stop_requested = False
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._request_stop)

    def add(self, name: str, launch: Callable[[], subprocess.Popen], restarts: bool) -> None:
        """Starts the service now, unless a stop was already asked for."""
        service = Service(name, launch, restarts)
        self.services.append(service)
        if not self.stop_requested:
            self._launch(service)

    def run(self) -> int:
        """Until SIGINT/SIGTERM (0) or the death of a service that does not restart (1)."""
        while not self.stop_requested:
            now = time.monotonic()
            for service in self.services:
                if service.restart_at is not None and now >= service.restart_at:
                    self._launch(service)
                elif service.process is not None and service.process.poll() is not None:
                    if not self._on_death(service, now):
                        return 1
            time.sleep(POLL_S)
        return 0

    def stop(self) -> None:
        """Stops the workers together (each may be finishing a task: STOP_TIMEOUT_S for all of
        them, not each: up to four minutes for the twelve workers of a host of four GPUs), then
        the others, last started first, waiting for each."""
        workers = [s for s in self.services if s.restarts and s.process is not None]
        drain_s = STOP_TIMEOUT_S if self.stop_timeout_s is None else self.stop_timeout_s
        child_process.stop_together([s.process for s in workers], drain_s)
        for service in workers:
            service.process = None
        for service in reversed(self.services):
            if service.process is not None:
                child_process.stop(service.process, STOP_TIMEOUT_S)
                service.process = None

    def _launch(self, service: Service) -> None:
        service.process = service.launch()
        service.started_at = time.monotonic()
        service.restart_at = None

    def _on_death(self, service: Service, now: float) -> bool:
        """Logs the death and schedules the restart; False when the stack must stop."""
        process = service.process
        child_process.kill(process)  # what it forked (a worker's pool) goes with it
        service.process = None
        reason = child_process.exit_reason(process.returncode)
        if not service.restarts:
            _say(f"{service.name} (pid {process.pid}) {reason}; stopping the stack")
            return False
        delay = service.backoff.delay_after(now - service.started_at)
        _say(f"{service.name} (pid {process.pid}) {reason}; restarting it in {delay:g} s")
        service.restart_at = now + delay
        return True

    def _request_stop(self, signum: int, _frame) -> None:
        # A flag, not an exception: a second signal must not cut the stopping short.
        if not self.stop_requested:
            _say(f"{signal.Signals(signum).name}: stopping")
        self.stop_requested = True


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
