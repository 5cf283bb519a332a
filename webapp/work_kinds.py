"""The kinds of work the GPU workers do. Each has a queue of its own per GPU type, a worker
process of its own (so its own concurrency) and a time limit of its own, so that no kind waits
behind another: a validation that hangs holds only the validation worker, never a run.

    kind      queue                 tasks                            time limit (settings)
    validate  gpu.<type>.validate   validate_problem                 VALIDATION_TIME_LIMIT_S
    run       gpu.<type>.run        run_agent                        RUN_TIME_LIMIT_S
    grade     gpu.<type>.grade      regrade_run, measure_baselines   REGRADE_TIME_LIMIT_S
                                    check_agents (staff's request)   (BASELINE_TIME_LIMIT_S)

Problems are validated on one GPU type (settings.VALIDATION_GPU_TYPE), so only its validate
queue is used. The limits and concurrencies are read from settings when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from webapp.durations import duration


@dataclass(frozen=True)
class WorkKind:
    name: str  # the queue's last part
    label: str  # as a page says it: "position 2 in the validation queue"
    limit_setting: str
    concurrency_setting: str

    @property
    def time_limit_s(self) -> int:
        return getattr(settings, self.limit_setting)

    @property
    def concurrency(self) -> int:
        return getattr(settings, self.concurrency_setting)

    def limit_reached(self) -> str:
        """Why an item of this kind was stopped at its limit, as its page and API say it."""
        return f"the {self.label} did not finish within its time limit of {self.limit_text()}"

    def limit_text(self) -> str:
        return duration(self.time_limit_s)

    def queue(self, gpu_type: str) -> str:
        return f"gpu.{gpu_type}.{self.name}"

    def gpu_types(self, gpu_types: list[str]) -> list[str]:
        """Of these GPU types, those this kind of work is sent to."""
        if self is VALIDATE:
            return [t for t in gpu_types if t == settings.VALIDATION_GPU_TYPE]
        return list(gpu_types)


VALIDATE = WorkKind("validate", "validation", "VALIDATION_TIME_LIMIT_S", "VALIDATION_CONCURRENCY")
RUN = WorkKind("run", "run", "RUN_TIME_LIMIT_S", "RUN_CONCURRENCY")
GRADE = WorkKind("grade", "re-grade", "REGRADE_TIME_LIMIT_S", "REGRADE_CONCURRENCY")
KINDS = (VALIDATE, RUN, GRADE)


def served(queues: list[str]) -> dict[str, list[str]]:
    """kind name -> the GPU types whose queue of that kind is among `queues` (a worker's -Q)."""
    found: dict[str, list[str]] = {kind.name: [] for kind in KINDS}
    for queue in queues:
        prefix, _, rest = queue.partition(".")
        gpu_type, _, kind = rest.rpartition(".")
        if prefix == "gpu" and gpu_type and kind in found:
            found[kind].append(gpu_type)
    return found
