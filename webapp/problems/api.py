from __future__ import annotations

from django.http import HttpRequest
from ninja import Field, Query, Router, Status

from gpu_workers.harness.problem_source import ProblemError
from webapp.api_params import PageParams, RowId, refuse_unknown_params
from webapp.errors import ErrorOut, error
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.schemas import ProblemIn, ProblemOut, ProblemSummaryOut
from webapp.problems.upload import upload_problem

router = Router(tags=["problems"])


@router.post(
    "",
    # 400: a body that is not JSON; 403: a browser session without its CSRF token; 413: a body
    # over the size limit.
    response={
        201: ProblemOut,
        200: ProblemOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        413: ErrorOut,
        422: ErrorOut,
        429: ErrorOut,
    },
    summary="Upload a problem",
)
def create_problem(request: HttpRequest, body: ProblemIn):
    """Store a problem and queue its validation. 201 when new; 200 with the existing problem
    when you already uploaded the same source (same hash after normalising line endings and
    trailing blanks), so retrying an upload is safe. 429 while you have as many problems
    waiting for or in validation as one may (settings.PENDING_VALIDATIONS_PER_USER)."""
    try:
        problem, created = upload_problem(request.user, body.title, body.source, body.visibility)
    except ProblemError as exc:
        return error(422, str(exc))
    return Status(201 if created else 200, problem)


class ListParams(PageParams):
    """Filters of GET /api/problems; a status that names nothing is a 422 listing the states."""

    status: ProblemStatus | None = Field(None, description="only problems in this state")
    mine: bool = Field(False, description="only your own problems")


@router.get("", response={200: list[ProblemSummaryOut], 401: ErrorOut, 422: ErrorOut})
def list_problems(request: HttpRequest, params: Query[ListParams]):
    """Your problems and public ones, newest first, narrowed by `status` and `mine`."""
    refuse_unknown_params(request, params)
    problems = Problem.objects.visible_to(request.user).select_related("owner")
    problems = problems.filtered(request.user, status=params.status, mine=params.mine)
    return problems[params.offset : params.offset + params.limit]


@router.get(
    "/{problem_id}", response={200: ProblemOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut}
)
def get_problem(request: HttpRequest, problem_id: RowId):
    problem = Problem.objects.visible_to(request.user).filter(pk=problem_id).first()
    if problem is None:
        return error(404, f"no problem {problem_id} that you can see")
    return problem
