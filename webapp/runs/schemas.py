from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

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


class GradeOut(Schema):
    """A run's re-grade: its best verified candidate verified again on secret seeds and timed
    in a fresh sandboxed process, holding the GPU lock. Only a ranked re-grade counts on a board;
    the times and speedups are the re-grade's own (medians after an L2 flush)."""

    status: str = Field(
        ..., description="pending (waiting for a worker), ranked (it counts) or under_review"
    )
    counts: bool = Field(..., description="whether this result counts on the suite boards")
    reasons: list[str] = Field(..., description="why it is held for review; empty otherwise")
    candidate: int = Field(..., description="the seq of the candidate re-graded")
    candidate_ms: float | None = Field(..., description="the candidate's median time, ms")
    eager_ms: float | None = Field(..., description="eager PyTorch's median time, ms")
    compile_ms: float | None = Field(..., description="torch.compile (default mode), ms")
    compile_max_autotune_ms: float | None = Field(
        ..., description="torch.compile (max-autotune), ms"
    )
    speedup_vs_eager: float | None = Field(..., description="eager_ms / candidate_ms")
    speedup_vs_compile: float | None = Field(..., description="compile_ms / candidate_ms")
    sol_ms: float | None = Field(..., description="the speed-of-light floor, ms")
    sol_fraction: float | None = Field(..., description="sol_ms / candidate_ms (1 = the floor)")
    max_rel_err: float | None = Field(..., description="largest relative error on the seeds")
    secret_seeds: int = Field(..., description="how many secret seeds it was verified on")
    graded: datetime | None = Field(..., description="when the re-grade ended")
    queue_position: int | None = Field(
        ..., description="while pending: 1 for the next re-grade of its GPU type"
    )
    agreement: dict[str, Any] = Field(
        ...,
        description="the run's own figures beside the re-grade's: limit (the protocol's "
        "repeatability, slower over faster), run, regrade (each measurement), agrees; empty "
        "where there was nothing to compare. A re-grade that does not agree is held",
    )

    @staticmethod
    def resolve_counts(grade) -> bool:
        return grade.status == "ranked"  # GradeStatus.RANKED: the board sits above runs

    @staticmethod
    def resolve_candidate(grade) -> int:
        return grade.candidate.seq

    @staticmethod
    def resolve_queue_position(grade) -> int | None:
        return grade.queue_position()


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
