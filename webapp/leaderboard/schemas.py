"""The boards as JSON. `definitions` (and /leaderboard/#definitions) say what every field means."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

from webapp.leaderboard.models import GradeStatus


class DefinitionOut(Schema):
    key: str = Field(..., description="the field of a row it defines")
    heading: str
    definition: str


class BoardRowOut(Schema):
    """One measured entrant, ranked. Shares are fractions from 0 to 1 over the valid problems."""

    rank: int
    entrant: str
    kind: str = Field(..., description="agent, person or compiler")
    evaluation: int | None = Field(..., description="the agent's evaluation counted; else null")
    reported: bool = Field(False, description="always false: measured here")
    problems: int = Field(..., description="the suite's valid problems")
    runs: int = Field(..., description="ended runs counted for spend")
    attempted: int
    correct: int = Field(..., description="problems with a ranked result")
    correct_rate: float
    fast_1_0_vs_compile: float
    fast_1_05_vs_compile: float
    fast_1_0_vs_eager: float
    fast_1_05_vs_eager: float
    geomean_speedup_vs_compile: float | None
    geomean_coverage: float
    geomean_speedup_vs_eager: float | None
    median_sol_fraction: float | None
    tokens_per_run: float | None
    dollars_per_run: float | None
    speedup_per_dollar: float | None = Field(
        None, description="geomean vs compile ÷ $ per run; null where runs cost nothing"
    )
    wall_minutes_per_run: float | None
    gpu_minutes_per_run: float | None
    under_review: int


class ReportedOut(Schema):
    """A paper's numbers, as it reports them: not measured here, never ranked."""

    reported: bool = Field(True, description="always true: a paper's number, not measured here")
    entrant: str
    gpu: str
    protocol: str = Field(..., description="the paper's tolerance, in words")
    citation: str
    url: str
    correct_rate: float | None
    fast_1_0_vs_compile: float | None
    fast_1_0_vs_eager: float | None
    geomean_speedup_vs_compile: float | None
    geomean_speedup_vs_eager: float | None
    note: str


class UnderReviewOut(Schema):
    run: int
    agent: str
    kind: str = Field(..., description="agent or submission")
    owner: str
    problem: str = Field(..., description="the problem's title")
    reasons: list[str]


class BoardOut(Schema):
    suite: str
    gpu_type: str
    protocol: str
    problems: int = Field(..., description="the suite's valid problems")
    rows: list[BoardRowOut] = Field(..., description="measured entrants in rank order")
    reported: list[ReportedOut] = Field(..., description="papers' rows, apart and unranked")
    under_review: list[UnderReviewOut]
    definitions: list[DefinitionOut]


class SuiteBoardOut(Schema):
    """A suite's board on one GPU type, in the leaderboard index."""

    suite: str
    protocol: str
    problems: int
    rows: list[BoardRowOut]


class GpuTypeBoardsOut(Schema):
    gpu_type: str
    suites: list[SuiteBoardOut]


class LeaderboardOut(Schema):
    gpu_types: list[GpuTypeBoardsOut]
    definitions: list[DefinitionOut]


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
        return grade.status == GradeStatus.RANKED

    @staticmethod
    def resolve_candidate(grade) -> int:
        return grade.candidate.seq

    @staticmethod
    def resolve_queue_position(grade) -> int | None:
        return grade.queue_position()
