from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Field, Schema


class ProblemIn(Schema):
    title: str = Field("", max_length=200)
    source: str
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
