"""The OpenAPI schema is the truth: schemathesis sends every operation requests made from the
schema, valid and invalid (huge and negative numbers, wrong types, empty strings, missing
fields), through the WSGI app as a signed-in user, and every answer must be no server error and
a status the operation declares. Bounded: a fixed seed and a fixed number of examples each."""

from __future__ import annotations

import copy

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import status_code_conformance

from tests.webapp.conftest import make_problem, make_run
from webapp.accounts.tokens import issue_token

CHECKS = [not_a_server_error, status_code_conformance]


# The schema comes from the app itself (no database needed), so the cases are known at collection.
APP = get_wsgi_application()
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", APP)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=100,
    deterministic=True,
    database="none",
)


@pytest.fixture
def connection_kept():
    """As Django's test client does: each request leaves the test's connection (and its
    transaction) open instead of closing it as a server does."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def token(connection_kept, alice, relu_scale) -> str:
    """Alice's API token, with a valid problem and a run for the ids the examples hit."""
    make_run(alice, make_problem(alice, relu_scale, public=True))
    return issue_token(alice)[1]


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_declared_and_none_is_a_server_error(case, token):
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)


def test_the_checks_catch_a_status_the_schema_does_not_declare(token):
    """The known-bad case: the same app against a schema whose list of problems forgets its
    422, as the schema did before offsets were bounded."""
    raw = copy.deepcopy(schema.raw_schema)
    del raw["paths"]["/api/problems"]["get"]["responses"]["422"]
    forgetful = schemathesis.openapi.from_dict(raw)
    forgetful.app = APP
    case = forgetful["/api/problems"]["GET"].Case(query={"offset": "-1"})
    with pytest.raises(FailureGroup, match="Undocumented status code"):
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
