"""The problem pages: list, upload (pasted or a file), detail, and the Optimize form."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.webapp.conftest import make_problem, make_run
from webapp import dispatch
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs import choices
from webapp.runs.models import Run

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def no_workers(monkeypatch):
    """Nothing is sent to a queue: uploads stay pending, runs stay queued."""
    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", lambda *args: None)
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *args: None)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload(client: Client, **fields):
    body = {"title": "", "visibility": "private", "source": "", **fields}
    return client.post("/problems/new/", body)


# ---- list ---------------------------------------------------------------------------------


def titled(problem: Problem, title: str) -> Problem:
    problem.title = title
    problem.save()
    return problem


def test_it_lists_your_problems_and_public_ones(alice, bob, relu_scale):
    titled(make_problem(alice, relu_scale), "mine")
    titled(make_problem(bob, relu_scale + "\n# 2\n", public=True), "bob public")
    titled(make_problem(bob, relu_scale + "\n# 3\n"), "bob private")
    page = logged_in(alice).get("/problems/").content.decode()
    assert "mine" in page and "bob public" in page and "bob private" not in page
    yours = logged_in(alice).get("/problems/?mine=1").content.decode()
    assert "mine" in yours and "bob public" not in yours


def test_it_lists_public_problems_to_anonymous_visitors(alice, relu_scale):
    make_problem(alice, relu_scale, public=True)
    r = Client().get("/problems/")
    assert r.status_code == 200 and "relu scale" in r.content.decode()


# ---- upload -------------------------------------------------------------------------------


def test_it_sends_anonymous_uploaders_to_log_in(db):
    r = Client().get("/problems/new/")
    assert r.status_code == 302 and r.url.startswith("/accounts/login/")


def test_it_uploads_pasted_source(alice, relu_scale):
    r = upload(logged_in(alice), title="relu times scale", source=relu_scale, visibility="public")
    problem = Problem.objects.get()
    assert r.status_code == 302 and r.url == f"/problems/{problem.pk}/"
    assert (problem.owner, problem.title, problem.visibility) == (
        alice,
        "relu times scale",
        "public",
    )
    assert problem.status == ProblemStatus.PENDING
    assert problem.source == relu_scale


def test_it_stores_pasted_source_with_unix_line_endings(alice, relu_scale):
    upload(logged_in(alice), source=relu_scale.replace("\n", "\r\n"))
    assert "\r" not in Problem.objects.get().source


def test_it_uploads_a_file_which_wins_over_pasted_text(alice, relu_scale):
    upload_file = SimpleUploadedFile("relu_scale.py", relu_scale.encode(), "text/x-python")
    r = upload(logged_in(alice), source="this is ignored", file=upload_file)
    problem = Problem.objects.get()
    assert r.status_code == 302
    assert problem.source == relu_scale
    assert problem.title == "relu_scale"  # the file's name when no title is given


def test_it_says_when_the_same_source_was_uploaded_before(alice, relu_scale):
    client = logged_in(alice)
    upload(client, source=relu_scale)
    r = upload(client, source=relu_scale, title="again")
    assert r.status_code == 302 and Problem.objects.count() == 1
    assert "uploaded this source before" in client.get(r.url).content.decode()


def test_it_refuses_an_empty_form(alice):
    r = upload(logged_in(alice))
    assert r.status_code == 422
    assert "Paste the problem" in r.content.decode()
    assert not Problem.objects.exists()


def test_it_refuses_oversized_pasted_source(alice, relu_scale, settings):
    settings.PROBLEM_MAX_BYTES = 1024
    big = relu_scale + "#" * 2000 + "\n"
    r = upload(logged_in(alice), source=big)
    assert r.status_code == 422
    assert "the limit is 1 KiB" in r.content.decode()
    assert not Problem.objects.exists()


def test_it_refuses_an_oversized_file(alice, relu_scale):
    big = (relu_scale + "#" * (300 * 1024) + "\n").encode()
    r = upload(logged_in(alice), file=SimpleUploadedFile("big.py", big))
    assert r.status_code == 422
    assert "the limit is 256 KiB" in r.content.decode()
    assert not Problem.objects.exists()


def test_it_refuses_a_file_that_is_not_utf8(alice, relu_scale):
    latin1 = (relu_scale + "# café\n").encode("latin-1")
    r = upload(logged_in(alice), file=SimpleUploadedFile("op.py", latin1))
    assert r.status_code == 422
    assert "op.py is not UTF-8 text" in r.content.decode()
    assert not Problem.objects.exists()


def test_it_refuses_a_file_that_is_not_python(alice, relu_scale):
    r = upload(logged_in(alice), file=SimpleUploadedFile("op.txt", relu_scale.encode()))
    assert r.status_code == 422
    assert "op.txt is not a .py file" in r.content.decode()


def test_it_shows_why_a_source_is_invalid_and_keeps_what_was_typed(alice):
    source = "import torch\n\nclass Model:\n    pass  # <b>mine</b>\n"
    r = upload(logged_in(alice), title="half done", source=source)
    page = r.content.decode()
    assert r.status_code == 422
    assert "missing get_inputs, get_init_inputs" in page
    assert "# &lt;b&gt;mine&lt;/b&gt;" in page  # the textarea still holds it, escaped
    assert 'value="half done"' in page
    assert not Problem.objects.exists()


def test_it_puts_an_invalid_files_text_in_the_textarea(alice):
    source = "def get_inputs(:\n"
    r = upload(logged_in(alice), file=SimpleUploadedFile("broken.py", source.encode()))
    page = r.content.decode()
    assert "syntax error on line 1" in page
    assert "def get_inputs(:" in page
    assert not Problem.objects.exists()


# ---- detail -------------------------------------------------------------------------------


def test_it_hides_a_private_problem_from_others(alice, charlie, relu_scale):
    problem = make_problem(alice, relu_scale)
    assert logged_in(charlie).get(f"/problems/{problem.pk}/").status_code == 404
    assert Client().get(f"/problems/{problem.pk}/").status_code == 404
    assert logged_in(alice).get(f"/problems/{problem.pk}/").status_code == 200


def test_it_shows_a_public_problem_to_anonymous_visitors(alice, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    r = Client().get(f"/problems/{problem.pk}/")
    page = r.content.decode()
    assert r.status_code == 200
    assert '<div class="highlight">' in page  # the source, highlighted
    assert "Log in</a> to start an agent" in page


def test_it_escapes_the_title_and_source(alice, relu_scale):
    problem = titled(make_problem(alice, relu_scale + f"\n# {SCRIPT}\n", public=True), SCRIPT)
    page = Client().get(f"/problems/{problem.pk}/").content.decode()
    assert SCRIPT not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert SCRIPT not in Client().get("/problems/").content.decode()


def test_it_shows_the_measurements_of_a_valid_problem(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    problem.eager_ms, problem.compile_ms = 0.5, 0.25
    problem.flops, problem.bytes_moved = 2_000_000, 8_000_000
    problem.save()
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert "0.5000 ms" in page and "0.2500 ms" in page
    assert "2,000,000 FLOP" in page and "8,000,000 B" in page
    assert 'title="floating-point operations of one call' in page  # each figure's definition
    assert "0.250 FLOP/byte" in page
    assert "problem_status.js" not in page


def test_it_polls_while_the_problem_is_validated(alice, relu_scale):
    problem = make_problem(alice, relu_scale, valid=False)
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert "problem_status.js" in page
    assert f'data-poll-url="/api/problems/{problem.pk}"' in page


def test_it_lists_the_reasons_of_a_rejected_problem(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    problem.status, problem.reasons = ProblemStatus.REJECTED, ["outputs are <constant>"]
    problem.save()
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert "outputs are &lt;constant&gt;" in page


def test_it_lists_the_problems_runs(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    run = make_run(alice, problem)
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert f'href="/runs/{run.pk}/"' in page


def test_it_offers_the_agents_with_fusion_chosen(alice, relu_scale, monkeypatch):
    monkeypatch.setattr(choices, "agent_names", lambda: ["fusion", "scripted-demo", "vllm"])
    problem = make_problem(alice, relu_scale)
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert '<option value="fusion" selected>' in page
    assert '<option value="fp32-strict">' in page
    assert "not installed yet" not in page


def test_it_chooses_the_scripted_demo_and_says_why_without_fusion(alice, relu_scale, monkeypatch):
    monkeypatch.setattr(choices, "agent_names", lambda: ["scripted-demo", "vllm"])
    problem = make_problem(alice, relu_scale)
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert '<option value="scripted-demo" selected>' in page
    assert "fusion agent is not installed yet" in page
    assert "only fits the relu_scale example" in page
    assert "agent/configs/agents.toml" in page and "docs/agents.md" in page


# ---- optimize -----------------------------------------------------------------------------


def optimize(client: Client, problem, **options):
    body = {"agent": "scripted-demo", "gpu_type": "cpu", "protocol": "loose", **options}
    return client.post(f"/problems/{problem.pk}/optimize", body)


def test_it_starts_a_run_and_shows_it(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    r = optimize(logged_in(alice), problem, protocol="fp32-strict")
    run = Run.objects.get()
    assert r.status_code == 302 and r.url == f"/runs/{run.pk}/"
    assert (run.owner, run.problem, run.agent, run.protocol) == (
        alice,
        problem,
        "scripted-demo",
        "fp32-strict",
    )


def test_it_runs_someone_elses_public_problem(alice, bob, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    assert optimize(logged_in(bob), problem).status_code == 302
    assert Run.objects.get().owner == bob


def test_it_shows_why_a_run_cannot_start(alice, relu_scale):
    problem = make_problem(alice, relu_scale, valid=False)
    r = optimize(logged_in(alice), problem)
    assert r.status_code == 409
    assert "is pending, not valid" in r.content.decode()
    assert not Run.objects.exists()


def test_it_shows_an_unknown_option(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    r = optimize(logged_in(alice), problem, agent="<nope>")
    assert r.status_code == 422
    assert "unknown agent &#x27;&lt;nope&gt;&#x27;: use one of" in r.content.decode()
    assert not Run.objects.exists()


def test_it_shows_the_hourly_limit(alice, relu_scale, settings):
    settings.RUNS_PER_HOUR = 1
    problem = make_problem(alice, relu_scale)
    client = logged_in(alice)
    assert optimize(client, problem).status_code == 302
    r = optimize(client, problem)
    assert r.status_code == 429
    assert "the limit is 1" in r.content.decode()
    assert Run.objects.count() == 1


def test_it_hides_a_private_problem_from_others_optimize(alice, charlie, relu_scale):
    problem = make_problem(alice, relu_scale)
    assert optimize(logged_in(charlie), problem).status_code == 404
    assert not Run.objects.exists()


def test_it_sends_anonymous_optimizers_to_log_in(alice, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    r = optimize(Client(), problem)
    assert r.status_code == 302 and r.url.startswith("/accounts/login/")
    assert not Run.objects.exists()
