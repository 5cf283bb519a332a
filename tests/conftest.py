"""Shared test set-up: a persistent compile cache (objects are content-addressed, so reuse across
runs is safe and saves minutes), and the fixture problems and candidates.

Under pytest-xdist (`-n auto --dist loadfile`; `make test` runs in one process, and
docs/architecture.md says why) what a worker keeps of its own: its Redis database (REDIS_URL's
number plus the worker's index, set below before Django reads its settings; with no REDIS_URL
an embedded redis-server per process, tests/webapp/conftest.py), its test database
(pytest-django adds _gw0, _gw1... to the name; the SQLite file is per process too) and its
`make run` stacks folder (tests/webapp/conftest.py).
Shared on purpose: the compile cache, whose writers lock and publish whole files, and with it
the cpu measurement lock (gpu_lock), so no worker times while another builds or times."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
os.environ.setdefault("KERNELARENA_CACHE", str(REPO / ".cache" / "kernelarena-test"))
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1...; "" when not parallel


def worker_redis_url(url: str, worker: str) -> str:
    """REDIS_URL for xdist worker `worker`: the same server, database number + the worker's
    index (redis://host:6379/8 -> /8 for gw0, /9 for gw1), so no two workers share a broker's
    queues or a channel layer's groups."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    index = int(worker.removeprefix("gw"))
    parts = urlsplit(url)
    if parts.scheme == "unix":  # unix://PATH?db=N
        query = dict(parse_qsl(parts.query))
        query["db"] = str(int(query.get("db", 0)) + index)
        return f"unix://{parts.path}?{urlencode(query)}"
    number = int(parts.path.strip("/") or 0) + index
    return urlunsplit(parts._replace(path=f"/{number}"))


# Before tests/webapp/conftest.py sets Django up; the processes tests start inherit both
# variables, and a pytest among them leaves the derived URL as it is.
if XDIST_WORKER and os.environ.get("REDIS_URL") and "KERNELARENA_TEST_REDIS" not in os.environ:
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], XDIST_WORKER)
    os.environ["KERNELARENA_TEST_REDIS"] = os.environ["REDIS_URL"]


def problem_source(name: str) -> str:
    return (FIXTURES / "problems" / f"{name}.py").read_text()


def candidate_dir(target: str, name: str) -> Path:
    return FIXTURES / "candidates" / target / name


@pytest.fixture
def drift_of_a_quiet_host(monkeypatch):
    """For tests that need an honest candidate's profile to pass in order to test something
    else (a run that succeeds, a grade that ranks), not drift: eager beside the candidate counts
    as running as it ran alone, so a busy CI host cannot hold the profile for review. Drift's
    own decision is tested on a busy host's batches (tests/gpu_workers/harness/test_profile.py),
    and every violation of the candidate's (its clock, its timed outputs, the floor) still
    fails. The judge decides drift in this process, so the runners' processes need nothing."""
    from gpu_workers.harness.judge import profile

    monkeypatch.setattr(profile.Measurement, "drift", lambda self: 1.0)


@pytest.fixture
def regrade_of_a_quiet_host(monkeypatch):
    """For tests that need a re-grade to rank in order to test something else: its time counts
    as agreeing with the run's own, as two measurements of a quiet host do, so a busy CI host
    (whose cores a test's other processes share) cannot hold it for a disagreement. The
    decision itself is tested on given figures (tests/gpu_workers/test_regrade.py); the re-grade
    still verifies on secret seeds and every violation still holds it."""
    from gpu_workers import regrade

    monkeypatch.setattr(regrade, "disagree", lambda own, measured, limit: False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every item its own node id. schemathesis gives each API operation's item the test's own
    id (tests/webapp/test_api_schema.py); pytest-xdist tells items apart by id alone, so under
    it one operation of 19 ran and 18 were neither run nor reported."""
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and not item.nodeid.endswith(f"[{label}]"):
            _rename(item, f"{item.nodeid}[{label}]")
    twice = sorted(nodeid for nodeid, n in Counter(i.nodeid for i in items).items() if n > 1)
    if twice:  # a test that pytest-xdist would run once and report once
        raise pytest.UsageError(f"tests share a node id: {', '.join(twice[:5])}")
    _slow_files_first(items)


def _slow_files_first(items: list[pytest.Item]) -> None:
    """`make test` hands pytest-xdist's workers whole files in collection order
    (--dist loadfile --no-loadscope-reorder): a file holding a test marked slow is collected first,
    so no long file starts last and runs on alone at the end (xdist's own order, most tests
    first, put the one-test end-to-end training file last: 8 minutes added to CI). Stable: the
    files keep their order otherwise, and each file's tests theirs."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


def _rename(item: pytest.Item, nodeid: str) -> None:
    """pytest keeps a node's id privately: a structured NodeId from pytest 9.1, a string before."""
    if hasattr(item, "_id"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(nodeid)
    else:
        item._nodeid = nodeid


def record_timing_budgets(monkeypatch) -> list:
    """The `budget_s` each judged step's timing is given from here on (None: the protocol's),
    in order: what a tune call's screening changes."""
    from gpu_workers.harness import session as session_mod

    budgets = []
    timed = session_mod.profile_mod.time_candidate

    def time_candidate(*args, budget_s=None):
        budgets.append(budget_s)
        return timed(*args, budget_s=budget_s)

    monkeypatch.setattr(session_mod.profile_mod, "time_candidate", time_candidate)
    return budgets
