from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema


class SuiteOut(Schema):
    name: str
    level: int | None = Field(..., description="KernelBench's level, if the suite is one")
    protocol: str = Field(..., description="every result on the suite is judged under it")
    description: str
    valid_problems: int = Field(..., alias="valid_count")
    total_problems: int = Field(..., alias="total_count")
    evaluations: int = Field(..., alias="evaluation_count")


class BaselineOut(Schema):
    """The times every entrant on the problem, GPU type and protocol is compared with."""

    gpu_type: str
    protocol: str
    eager_ms: float | None
    compile_ms: float | None = Field(..., description="torch.compile, default mode")
    compile_max_autotune_ms: float | None
    sol_ms: float | None = Field(..., description="the speed-of-light floor")
    error: str = Field(..., description="why the last measurement failed; empty if it did not")
    requested: datetime | None
    measured: datetime | None


class SuiteProblemOut(Schema):
    name: str = Field(..., description="the name in the suite, e.g. 19_ReLU")
    position: int
    problem: int = Field(..., alias="problem_id", description="the problem's id")
    title: str = Field(..., alias="problem.title")
    status: str = Field(..., alias="problem.status", description="valid problems are scored")
    reasons: list[str] = Field(..., alias="problem.reasons", description="why it was rejected")
    baselines: list[BaselineOut] = Field(..., alias="problem.baselines")


class SuiteDetailOut(SuiteOut):
    source_path: str = Field(..., description="the folder it was imported from")
    problems: list[SuiteProblemOut] = Field(..., alias="problem_entries")
