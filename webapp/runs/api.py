from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from webapp.api_params import SEQ_MAX, PageParams, RowId, Seq, id_filter, refuse_unknown_params
from webapp.errors import ErrorOut, error
from webapp.problems.models import Problem
from webapp.problems.schemas import SubmissionIn
from webapp.runs import model_keys
from webapp.runs.bundle import bundle_response
from webapp.runs.lifecycle import cancel_run, start_run, start_submission
from webapp.runs.models import Candidate, Run, RunStatus
from webapp.runs.run_filters import RunFilters, filtered_runs
from webapp.runs.schemas import (
    CandidateOut,
    CandidateSummaryOut,
    RunDetailOut,
    RunIn,
    RunOut,
    TraceEventOut,
)
from webapp.runs.trace import events_after

router = Router(tags=["runs"])
# POST /api/problems/{id}/submissions: mounted beside the problems' own routes, here because it
# starts a run.
problem_submissions = Router(tags=["problems"])
# What a route that starts a run answers: the refusals come from webapp/errors.py's handler; 400
# is a body that is not JSON, 403 a browser session without its CSRF token, 413 a body over
# the size limit.
STARTS_A_RUN = {
    201: RunOut,
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
    422: ErrorOut,
    429: ErrorOut,
}
# What a route that reads one run answers besides its 200: 422 is an id out of range.
READS_A_RUN = {401: ErrorOut, 404: ErrorOut, 422: ErrorOut}


class ListParams(PageParams):
    """Filters of GET /api/runs; each value is checked (422 with the accepted values)."""

    problem: int | None = id_filter("only the runs on this problem")
    status: RunStatus | None = Field(None, description="only runs in this state")
    agent: str | None = Field(
        None, min_length=1, max_length=100, description="only runs of this agent configuration"
    )
    gpu_type: str | None = Field(
        None, min_length=1, max_length=40, description="only runs on this GPU type"
    )
    mine: bool = Field(False, description="only your own runs")


class EventParams(Schema):
    after: int = Field(0, ge=0, le=SEQ_MAX, description="return events with seq greater than this")
    limit: int = Field(500, ge=1, le=1000)


class BundleParams(Schema):
    candidate: int | None = Field(
        None, ge=1, le=SEQ_MAX, description="a verified candidate's seq; default: the run's best"
    )


def _visible_run(request: HttpRequest, run_id: int) -> Run | None:
    runs = Run.objects.visible_to(request.user).select_related("owner", "problem", "best_candidate")
    return runs.filter(pk=run_id).first()


def _not_found(run_id: int) -> Status:
    return error(404, f"no run {run_id} that you can see")


@router.post(
    "",
    response=STARTS_A_RUN,
    summary="Start a run",
)
def create_run(request: HttpRequest, body: RunIn):
    """Queue an agent run on a valid problem you can see. 409 while the problem is not valid;
    429 past the hourly limit of runs per user (settings.RUNS_PER_HOUR)."""
    problem = Problem.objects.visible_to(request.user).filter(pk=body.problem_id).first()
    if problem is None:
        return error(404, f"no problem {body.problem_id} that you can see")
    run = start_run(request.user, problem, body.agent, body.gpu_type, body.protocol)
    return Status(201, run)


@router.get("", response={200: list[RunOut], 401: ErrorOut, 422: ErrorOut})
def list_runs(request: HttpRequest, params: Query[ListParams]):
    """Your runs and runs on public problems, newest first, narrowed by `status`, `agent`,
    `gpu_type`, `problem` and `mine`. A status, agent or GPU type that names nothing, or a
    parameter this list does not take, is a 422 that lists the accepted ones."""
    refuse_unknown_params(request, params)
    visible = Run.objects.visible_to(request.user).select_related("owner", "best_candidate")
    filters = RunFilters(
        status=params.status,
        agent=params.agent,
        gpu_type=params.gpu_type,
        problem=params.problem,
        mine=params.mine,
    )
    runs = filtered_runs(visible, request.user, filters)
    return runs[params.offset : params.offset + params.limit]


@router.get("/{run_id}", response={200: RunDetailOut, **READS_A_RUN})
def get_run(request: HttpRequest, run_id: RowId):
    """The run, with its time limit, while queued its place in its GPU type's queue, and its
    re-grade (`grade`: status, times, speedups, whether it counts, the reasons when held)."""
    run = _visible_run(request, run_id)
    return run if run is not None else _not_found(run_id)


@router.post(
    "/{run_id}/cancel",
    response={200: RunOut, 403: ErrorOut, 409: ErrorOut, **READS_A_RUN},
)
def cancel(request: HttpRequest, run_id: RowId):
    """Stop a queued or running run. Only its owner may; 409 once it has ended."""
    run = _visible_run(request, run_id)
    if run is None:
        return _not_found(run_id)
    if run.owner_id != request.user.pk:
        return error(403, f"run {run_id} belongs to {run.owner.username}: only they can stop it")
    cancel_run(run)
    return run


@router.get("/{run_id}/events", response={200: list[TraceEventOut], **READS_A_RUN})
def list_events(request: HttpRequest, run_id: RowId, params: Query[EventParams]):
    """The run's trace in order, from the first event after `after` (resume with the last seq
    you saw); the last is the status event with state `ended`. The websocket
    /ws/runs/{run_id}/?after=SEQ streams the same events live (see the description above)."""
    run = _visible_run(request, run_id)
    if run is None:
        return _not_found(run_id)
    return list(events_after(run, params.after, params.limit))


@router.get(
    "/{run_id}/candidates",
    response={200: list[CandidateSummaryOut], **READS_A_RUN},
)
def list_candidates(request: HttpRequest, run_id: RowId):
    """Every candidate the run verified or profiled, in order, without sources."""
    run = _visible_run(request, run_id)
    if run is None:
        return _not_found(run_id)
    return list(run.candidates.order_by("seq"))


def _visible_candidate(request: HttpRequest, run_id: int, seq: int) -> Candidate | None:
    run = _visible_run(request, run_id)
    return None if run is None else run.candidates.filter(seq=seq).first()


@router.get(
    "/{run_id}/candidates/{seq}",
    response={200: CandidateOut, **READS_A_RUN},
)
def get_candidate(request: HttpRequest, run_id: RowId, seq: Seq):
    """One candidate with its sources (workspace path -> text) and the harness's verdict."""
    candidate = _visible_candidate(request, run_id, seq)
    if candidate is None:
        return error(404, f"no candidate {seq} of a run {run_id} that you can see")
    return candidate


@router.get(
    "/{run_id}/bundle",
    response={200: None, **READS_A_RUN},
    summary="Download the best kernel as a zip",
)
def download_bundle(request: HttpRequest, run_id: RowId, params: Query[BundleParams]):
    """A zip of the run's best verified candidate (or `?candidate=SEQ`): model_new.py,
    kernels/, the binding files, build.py (builds and verifies with only torch installed) and
    report.json."""
    run = _visible_run(request, run_id)
    if run is None:
        return _not_found(run_id)
    candidate = params.candidate
    seq = candidate if candidate is not None else _best_seq(run)
    chosen = run.candidates.filter(seq=seq, verified=True).first() if seq else None
    if chosen is None:
        what = f"candidate {candidate}" if candidate is not None else "best candidate"
        return error(404, f"run {run_id} has no verified {what} to download")
    return bundle_response(chosen)


def _best_seq(run: Run) -> int | None:
    return run.best_candidate.seq if run.best_candidate_id else None


@problem_submissions.post(
    "/{problem_id}/submissions",
    response=STARTS_A_RUN,
    summary="Submit your own kernel",
)
def submit_kernel(request: HttpRequest, problem_id: RowId, body: SubmissionIn):
    """Queue your own model_new.py and kernels/ files on a valid problem you can see: they go
    through the same compile, verify, profile and re-grade as an agent's, and rank as your row
    on the suite boards. 422 names each file to fix; 409 while the problem is not valid; 429
    past the hourly limit of runs (submissions count as runs)."""
    problem = Problem.objects.visible_to(request.user).filter(pk=problem_id).first()
    if problem is None:
        return error(404, f"no problem {problem_id} that you can see")
    run = start_submission(request.user, problem, body.files, body.gpu_type, body.protocol)
    return Status(201, run)


# ---- /api/model-keys: a person's own API keys for agents that call a paid model ----

model_keys_router = Router(tags=["model keys"])
WRITES_A_KEY = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 413: ErrorOut, 422: ErrorOut}


class ModelKeyIn(Schema):
    key: str = Field(..., min_length=1, max_length=model_keys.MAX_KEY_LENGTH)


class ModelKeyOut(Schema):
    agent: str
    last4: str = Field(description="the key's last four characters; empty for a short key")
    updated: datetime


@model_keys_router.get("", response={200: list[ModelKeyOut], 401: ErrorOut})
def list_model_keys(request: HttpRequest):
    """Your saved keys: the agent and the key's last four characters, never the key."""
    return model_keys.keys_of(request.user)


@model_keys_router.put("/{agent}", response={200: ModelKeyOut, **WRITES_A_KEY})
def save_model_key(request: HttpRequest, agent: str, body: ModelKeyIn):
    """Save (or replace) your key for an agent that takes one; your runs of it use it. Stored
    encrypted; the answer holds only its last four characters."""
    return model_keys.save_key(request.user, agent, body.key)


@model_keys_router.delete(
    "/{agent}", response={204: None, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}
)
def remove_model_key(request: HttpRequest, agent: str):
    """Remove your key for an agent: its runs use the operator's key again."""
    if not model_keys.remove_key(request.user, agent):
        return error(404, f"you have no saved key for agent {agent!r}")
    return Status(204, None)
