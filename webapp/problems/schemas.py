from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Field, Schema

from webapp.work_kinds import VALIDATE


class ProblemIn(Schema):
    title: str = Field("", max_length=200)
    source: str = Field(..., min_length=1, description="the problem's Python source")
    visibility: Literal["private", "public"] = "private"


class ProblemSummaryOut(Schema):
    id: int
    title: str
    owner: str = Field(..., alias="owner.username")
    visibility: str
    status: str
    sha256: str
    created: datetime


class ProblemOut(ProblemSummaryOut):
    source: str
    reasons: list[str]
    eager_ms: float | None
    compile_ms: float | None
    flops: int | None
    bytes_moved: int | None
    sol_ms: float | None
    validated_on: str
    updated: datetime
    validation_started: datetime | None = Field(
        None,
        description="when a worker last started validating it; its time limit counts from here",
    )
    validation_time_limit_s: int = Field(
        0, description="a validation still running this long after it started is stopped"
    )
    queue_position: int | None = Field(
        None, description="while pending: 1 for the next problem a validation worker takes"
    )

    @staticmethod
    def resolve_validation_time_limit_s(problem) -> int:
        return VALIDATE.time_limit_s

    @staticmethod
    def resolve_queue_position(problem) -> int | None:
        return problem.queue_position()


class SubmissionIn(Schema):
    """Your own kernel: workspace path -> text (model_new.py, kernels/<name>.<suffix>)."""

    files: dict[str, str] = Field(
        ...,
        description="model_new.py (required) and kernels/<name>.cu|.cuh|.cpp|.h|.hpp "
        "(.cpp|.h|.hpp on the cpu GPU type), each at most 512 KiB of UTF-8 text; 32 files at most",
    )
    gpu_type: str = Field(..., max_length=40)
    protocol: str = Field("loose", max_length=40)
