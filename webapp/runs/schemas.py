from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

from webapp.leaderboard.schemas import GradeOut
from webapp.work_kinds import RUN


class RunIn(Schema):
    problem_id: int
    agent: str = Field(..., max_length=100)
    gpu_type: str = Field(..., max_length=40)
    protocol: str = Field("loose", max_length=40)


class RunOut(Schema):
    id: int
    problem_id: int
    owner: str = Field(..., alias="owner.username")
    agent: str
    kind: str  # agent, or submission (a person's own kernel)
    evaluation_id: int | None  # the suite evaluation it belongs to
    gpu_type: str
    protocol: str
    status: str
    gpu_seconds: float  # time it held the GPU lock
    best_speedup_vs_compile: float | None
    best_speedup_vs_eager: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_dollars: float
    error: str
    attempts: int
    best_candidate: int | None  # its seq
    created: datetime
    started: datetime | None
    finished: datetime | None

    @staticmethod
    def resolve_best_candidate(run) -> int | None:
        return run.best_candidate.seq if run.best_candidate_id else None


class RunDetailOut(RunOut):
    """One run, with where it stands in its GPU type's run queue and its re-grade."""

    time_limit_s: int = Field(
        0, description="a run still running this long after it started is stopped"
    )
    outcome: str = Field(
        "",
        description="its status as the pages show it: the status, or 'finished: nothing "
        "faster' for a succeeded run whose counted best is slower than eager",
    )
    queue_position: int | None = Field(
        None, description="while queued: 1 for the next run a worker of its GPU type takes"
    )

    grade: GradeOut | None = Field(
        None,
        description="the re-grade of its best verified candidate: the result that counts; "
        "null for a run that ended without one",
    )

    @staticmethod
    def resolve_outcome(run) -> str:
        return run.outcome

    @staticmethod
    def resolve_time_limit_s(run) -> int:
        return RUN.time_limit_s

    @staticmethod
    def resolve_queue_position(run) -> int | None:
        return run.queue_position()

    @staticmethod
    def resolve_grade(run):
        return getattr(run, "grade", None)  # the reverse one-to-one raises when there is none


class TraceEventOut(Schema):
    seq: int
    at: datetime
    kind: str
    payload: dict[str, Any]


class CandidateSummaryOut(Schema):
    seq: int
    verified: bool
    speedup_vs_compile: float | None
    files: list[str]
    created: datetime

    @staticmethod
    def resolve_files(candidate) -> list[str]:
        return sorted(candidate.sources)


class CandidateOut(CandidateSummaryOut):
    sources: dict[str, str]
    verdict: dict[str, Any]
