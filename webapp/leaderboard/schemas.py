"""The boards as JSON. `definitions` (and /leaderboard/#definitions) say what every field means."""

from __future__ import annotations

from ninja import Field, Schema


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
    trained: str | None = Field(
        None,
        description="an agent that is a trained checkpoint (python -m agent.train): its method, "
        "base model, data and steps in one line; else null",
    )
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
