from __future__ import annotations

from ninja import Field, Schema


class StandingOut(Schema):
    """One row of a board; GET /leaderboard/#definitions defines each field."""

    rank: int = Field(..., description="position within its protocol's board, from 1")
    agent: str
    protocol: str
    runs: int
    attempted: int
    verified: int
    correct_rate: float = Field(..., description="verified / attempted, 0 to 1")
    geomean_speedup_vs_compile: float | None = Field(
        ..., description="over verified problems, each with the agent's best run; null if none"
    )
    fast_1_0_vs_compile: float = Field(
        ..., description="share of attempted problems with best speedup vs compile >= 1.0"
    )
    tokens_per_run: float
    dollars_per_run: float
