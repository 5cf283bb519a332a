from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema


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
    gpu_type: str
    protocol: str
    status: str
    best_speedup_vs_compile: float | None
    best_speedup_vs_eager: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_dollars: float
    error: str
    created: datetime
    started: datetime | None
    finished: datetime | None


class TraceEventOut(Schema):
    seq: int
    at: datetime
    kind: str
    payload: dict[str, Any]
