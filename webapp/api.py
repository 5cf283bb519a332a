"""The REST API at /api/ (OpenAPI docs at /api/docs). Each app's api.py has a Router; they are
mounted here. Every error body is {"detail": "<what went wrong and what to do>"}."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.db import DataError
from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, ValidationError

from webapp.accounts.authentication import API_AUTH
from webapp.body_limit import too_large
from webapp.errors import RequestRefused
from webapp.leaderboard.api import router as leaderboard_router
from webapp.leaderboard.api import suite_boards
from webapp.problems.api import router as problems_router
from webapp.runs.api import model_keys_router, problem_submissions
from webapp.runs.api import router as runs_router
from webapp.suites.api import router as suites_router

DESCRIPTION = """Upload PyTorch ops and have agents turn them into verified, faster kernels.

Authenticate with `Authorization: Bearer <token>` (create one under **API tokens**).

**Live trace.** `ws://HOST/ws/runs/{run_id}/?after=SEQ` streams a run's events as
`{"type": "event", "event": {seq, at, kind, payload}}` frames: the saved events after SEQ, then
live ones, each once and in order. Send the bearer token; no `Origin` header is needed (a
browser's session cookie works only from this site's pages). After the run's last event (status
`ended`) the server closes the socket with 1000; 4404 is a run you cannot see, 4400 a bad
`after`. `GET /api/runs/{run_id}/events?after=SEQ` returns the same events by polling. The
README has a complete client for each."""

api = NinjaAPI(title="KernelArena", description=DESCRIPTION, auth=API_AUTH)
api.add_router("/problems", problems_router)
api.add_router("/problems", problem_submissions)
api.add_router("/runs", runs_router)
api.add_router("/model-keys", model_keys_router)
api.add_router("/suites", suites_router)
api.add_router("/suites", suite_boards)
api.add_router("/leaderboard", leaderboard_router)


@api.exception_handler(AuthenticationError)
def unauthenticated(request: HttpRequest, exc: AuthenticationError):
    detail = "not signed in: send 'Authorization: Bearer <your API token>' or log in"
    return api.create_response(request, {"detail": detail}, status=401)


@api.exception_handler(RequestRefused)
def refused(request: HttpRequest, exc: RequestRefused):
    """Every domain refusal, at the status its class names (422, 409, 429)."""
    return api.create_response(request, {"detail": str(exc)}, status=exc.status)


@api.exception_handler(RequestDataTooBig)
def body_too_large(request: HttpRequest, exc: RequestDataTooBig):
    return api.create_response(request, {"detail": too_large(request)}, status=413)


@api.exception_handler(DataError)
def unstorable_value(request: HttpRequest, exc: DataError):
    """A value the database cannot hold or compare, such as a NUL character in a name on
    PostgreSQL: the request's fault, with the database's reason."""
    detail = f"a value in the request cannot be used: {exc}; remove it and send it again"
    return api.create_response(request, {"detail": detail}, status=422)


@api.exception_handler(ValidationError)
def invalid_request(request: HttpRequest, exc: ValidationError):
    """Pydantic's error list as one sentence: `field: problem; field: problem`."""
    parts = []
    for issue in exc.errors:
        where = ".".join(
            str(part) for part in issue.get("loc", ()) if part not in ("body", "query", "path")
        )
        parts.append(f"{where}: {issue.get('msg', 'invalid')}" if where else issue.get("msg"))
    return api.create_response(request, {"detail": "; ".join(parts)}, status=422)
