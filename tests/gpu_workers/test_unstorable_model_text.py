"""A model writes what it likes, and PostgreSQL stores less than Python holds: the NUL
character and lone surrogates (in jsonb and in text). A reply holding them, in its thought, a
tool call's arguments, a file's content or the finish summary, neither crashes its run nor
costs it its candidate: the trace shows each as U+FFFD, and a file with a NUL is refused with
an error the model reads (source is text), before anything is written.

Known-bad before: the first thought with a NUL ended the run as "crashed" on PostgreSQL (CI's
database; SQLite stores it, so this file proves its point where DATABASE_URL names PostgreSQL).
"""

from __future__ import annotations

import json

import pytest

from gpu_workers import agent_run
from tests.webapp.conftest import make_problem
from tests.webapp.live_stack import DEMO_SCRIPT
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_server")]
MARK = "\ufffd"


def script_with_unstorable_text(demo: list[dict]) -> list[dict]:
    """The demo's session, with a NUL and a lone surrogate where a model could write them."""
    listing, writing, compiling, verifying, *_ = demo
    binary = {"tool": "write_file", "args": {"path": "kernels/x.cpp", "content": "int\n\x00x;"}}
    return [
        {**listing, "thought": "list\x00 the files \ud800"},
        {"thought": "one file first", "calls": [binary]},
        writing,
        compiling,
        verifying,
        {"thought": "done", "tool": "finish", "args": {"summary": "fused\x00 \udfff"}},
    ]


@pytest.fixture
def unstorable_agent(tmp_path, monkeypatch) -> str:
    script = tmp_path / "unstorable.json"
    script.write_text(json.dumps(script_with_unstorable_text(json.loads(DEMO_SCRIPT.read_text()))))
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[agents.unstorable]\nbackend = "scripted"\nscript = "{script}"\n')
    monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(agents))
    return "unstorable"


def test_a_reply_with_text_the_database_cannot_store_keeps_its_run(
    alice, relu_scale, unstorable_agent
):
    run = Run.objects.create(
        problem=make_problem(alice, relu_scale),
        owner=alice,
        agent=unstorable_agent,
        gpu_type="cpu",
        protocol="loose",
    )

    assert agent_run.run(run.pk, "host-a:1") == f"run {run.pk} succeeded"

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.best_candidate.verified
    assert "kernels/x.cpp" not in run.best_candidate.sources
    events = list(run.events.order_by("seq").values_list("kind", "payload"))
    thoughts = [p["text"] for kind, p in events if kind == "thought"]
    assert thoughts[0] == f"list{MARK} the files {MARK}"
    refusal = next(p for kind, p in events if kind == "tool_result" and p["turn"] == 2)
    assert not refusal["ok"]
    assert "kernels/x.cpp contains a NUL character (line 2)" in refusal["text"]
    (call,) = [p for kind, p in events if kind == "tool_call" and p["turn"] == 2]
    assert call["arguments"]["content"] == f"int\n{MARK}x;"
    assert events[-1][1]["detail"] == f"fused{MARK} {MARK}"
