"""The run pages: the live run, cancelling, a candidate's verdict, sources and diff, and the
bundle downloads (their contents are tested in test_bundle.py)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.webapp.conftest import make_problem, make_run
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.runs.lifecycle import end_event
from webapp.runs.models import Candidate, RunStatus
from webapp.runs.trace import record_event

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def private_run(alice, relu_scale):
    return make_run(alice, make_problem(alice, relu_scale + "\n# private\n"))


@pytest.fixture
def public_run(alice, relu_scale):
    return make_run(alice, make_problem(alice, relu_scale, public=True))


def add_candidate(run, seq: int, sources: dict, verified: bool = True, **profile) -> Candidate:
    verdict = {
        "verify": {
            "ok": verified,
            "trials": 5,
            "max_abs_err": 1e-6,
            "max_rel_err": 2e-7,
            "violations": [],
            "error": None,
        },
        "profile": {"ok": verified, "violations": [], "error": None, **profile}
        if profile
        else None,
        "environment": {"gpu": "cpu", "torch": "2.13.0"},
        "protocol": {"name": "loose", "atol": 0.01},
    }
    return Candidate.objects.create(
        run=run,
        seq=seq,
        sources=sources,
        verdict=verdict,
        verified=verified,
        speedup_vs_compile=profile.get("speedup_vs_compile"),
    )


def make_best(run, candidate: Candidate) -> None:
    run.best_candidate = candidate
    run.best_speedup_vs_compile = candidate.speedup_vs_compile
    run.best_speedup_vs_eager = (candidate.verdict.get("profile") or {}).get("speedup_vs_eager")
    run.save()


# ---- the run page -------------------------------------------------------------------------


def test_it_shows_a_run_to_its_owner_only(private_run, alice, charlie):
    assert logged_in(alice).get(f"/runs/{private_run.pk}/").status_code == 200
    r = logged_in(charlie).get(f"/runs/{private_run.pk}/")
    assert r.status_code == 404
    assert f"There is no run {private_run.pk} that you can see." in r.content.decode()
    assert Client().get(f"/runs/{private_run.pk}/").status_code == 404


def test_it_shows_a_public_run_to_anonymous_visitors(public_run):
    r = Client().get(f"/runs/{public_run.pk}/")
    page = r.content.decode()
    assert r.status_code == 200
    assert "run_trace.js" in page
    assert f'data-run-id="{public_run.pk}"' in page
    assert "Cancel run" not in page


def test_an_imported_run_says_where_its_trace_is_and_waits_for_none(public_run):
    """A run from a results file has no trace here: the page says so, and loads no live trace
    (known-bad: "loading the trace…" forever, on level 1's imported runs in a fresh make run)."""
    public_run.imported_from = "gpu-host/run/46"
    public_run.status = RunStatus.SUCCEEDED
    public_run.save()
    page = Client().get(f"/runs/{public_run.pk}/").content.decode()
    assert "measured on another site" in page and "gpu-host/run/46" in page
    assert "run_trace.js" not in page and 'id="trace"' not in page
    assert 'id="candidates"' in page  # its best candidate still shows


def test_it_shows_the_header(private_run, alice):
    private_run.prompt_tokens, private_run.completion_tokens = 1200, 300
    private_run.cost_dollars = 0.0123
    private_run.save()
    record_event(private_run, "status", {"state": "running", "turn": 3, "max_turns": 10})
    page = logged_in(alice).get(f"/runs/{private_run.pk}/").content.decode()
    assert ">scripted-demo<" in page and ">loose<" in page and ">cpu<" in page
    assert ">3/10<" in page
    assert ">1,500<" in page
    assert "$0.0123" in page


def test_it_offers_the_bundle_of_a_verified_best_candidate(private_run, alice):
    page = logged_in(alice).get(f"/runs/{private_run.pk}/").content.decode()
    assert "Download bundle" not in page
    best = add_candidate(
        private_run, 1, {"model_new.py": "x = 1\n"}, speedup_vs_eager=2.0, speedup_vs_compile=1.25
    )
    make_best(private_run, best)
    page = logged_in(alice).get(f"/runs/{private_run.pk}/").content.decode()
    assert f'href="/runs/{private_run.pk}/bundle.zip"' in page
    assert "1.25×" in page
    assert f'href="/runs/{private_run.pk}/candidates/1/"' in page


@pytest.mark.parametrize("versus_compile, said", [(0.8, True), (1.25, False)])
def test_a_best_kernel_slower_than_torch_compile_is_said_and_still_downloads(
    private_run, alice, versus_compile, said
):
    best = add_candidate(
        private_run, 1, {"model_new.py": "x = 1\n"}, speedup_vs_eager=1.5,
        speedup_vs_compile=versus_compile,
    )  # fmt: skip
    make_best(private_run, best)
    page = logged_in(alice).get(f"/runs/{private_run.pk}/").content.decode()
    assert ("No faster kernel found: best 0.80× of torch.compile" in page) == said
    assert f'href="/runs/{private_run.pk}/bundle.zip"' in page


@pytest.mark.parametrize(
    "versus_eager, badge",
    [(0.4, 'class="status big s-nothing-faster"'), (1.5, 'class="status big s-succeeded"')],
)
def test_a_run_that_found_nothing_faster_than_eager_says_so_and_still_downloads(
    private_run, alice, versus_eager, badge
):
    """Known-bad: a run whose every kernel was slower than eager was a green "succeeded"."""
    best = add_candidate(
        private_run, 1, {"model_new.py": "x = 1\n"}, speedup_vs_eager=versus_eager,
        speedup_vs_compile=versus_eager / 2,
    )  # fmt: skip
    make_best(private_run, best)
    private_run.status = RunStatus.SUCCEEDED
    private_run.save()
    end_event(private_run, RunStatus.SUCCEEDED, "")
    owner = logged_in(alice)

    page = owner.get(f"/runs/{private_run.pk}/").content.decode()
    assert badge in page
    nothing_faster = versus_eager < 1
    assert (">finished: nothing faster<" in page) is nothing_faster
    assert f'href="/runs/{private_run.pk}/bundle.zip"' in page
    assert owner.get(f"/runs/{private_run.pk}/bundle.zip").status_code == 200
    listed = owner.get("/runs/").content.decode()
    assert (">finished: nothing faster<" in listed) is nothing_faster
    ended = private_run.events.get(payload__state="ended").payload
    assert ended["run_status"] == "succeeded"  # the status, filters and re-grade are unchanged
    assert ended.get("outcome") == ("finished: nothing faster" if nothing_faster else None)


# ---- the re-grade section ----------------------------------------------------------------


def regrade_section(run) -> str:
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    start = page.index('<section id="regrade">')
    return page[start : page.index("</section>", start)]


def test_it_says_a_run_without_a_grade_is_not_regraded(public_run):
    # run.grade raises RelatedObjectDoesNotExist; the template must treat that as no grade.
    assert "Not re-graded" in regrade_section(public_run)


def test_it_shows_a_pending_a_ranked_and_a_held_regrade(public_run):
    best = add_candidate(public_run, 1, {"model_new.py": "x = 1\n"}, speedup_vs_compile=9.0)
    make_best(public_run, best)
    grade = Grade.objects.create(run=public_run, candidate=best)
    assert "pending" in regrade_section(public_run)
    assert "candidate 1 again" in regrade_section(public_run)

    grade.status, grade.secret_seeds, grade.candidate_ms = GradeStatus.RANKED, 3, 0.0125
    grade.speedup_vs_eager, grade.speedup_vs_compile, grade.sol_fraction = 2.5, 1.4, 0.42
    grade.save()
    ranked = regrade_section(public_run)
    assert "ranked" in ranked and "3 secret seeds" in ranked
    for shown in ("0.0125 ms", "2.50×", "1.40×", "42%"):
        assert shown in ranked

    grade.status, grade.reasons = GradeStatus.UNDER_REVIEW, [f"wrong output: {SCRIPT}"]
    grade.save()
    held = regrade_section(public_run)
    assert "under review" in held and f"wrong output: {ESCAPED}" in held
    assert SCRIPT not in held and "1.40×" not in held


# ---- cancel -------------------------------------------------------------------------------


def test_it_cancels_a_run_of_its_owner(private_run, alice):
    client = logged_in(alice)
    assert "Cancel run" in client.get(f"/runs/{private_run.pk}/").content.decode()
    r = client.post(f"/runs/{private_run.pk}/cancel")
    assert r.status_code == 302 and r.url == f"/runs/{private_run.pk}/"
    private_run.refresh_from_db()
    assert private_run.status == RunStatus.CANCELLED
    page = client.get(r.url).content.decode()
    assert "is cancelled" in page and "Cancel run" not in page


def test_it_says_an_ended_run_cannot_be_cancelled(private_run, alice):
    private_run.status = RunStatus.SUCCEEDED
    private_run.save()
    client = logged_in(alice)
    r = client.post(f"/runs/{private_run.pk}/cancel", follow=True)
    assert "has already succeeded" in r.content.decode()
    private_run.refresh_from_db()
    assert private_run.status == RunStatus.SUCCEEDED


def test_it_lets_only_the_owner_cancel(public_run, bob, charlie, private_run):
    r = logged_in(bob).post(f"/runs/{public_run.pk}/cancel")
    assert r.status_code == 403
    assert "only they can cancel it" in r.content.decode()
    assert logged_in(charlie).post(f"/runs/{private_run.pk}/cancel").status_code == 404
    assert Client().post(f"/runs/{public_run.pk}/cancel").status_code == 302  # to log in
    public_run.refresh_from_db()
    private_run.refresh_from_db()
    assert public_run.status == private_run.status == RunStatus.QUEUED


# ---- candidates ---------------------------------------------------------------------------


def test_it_shows_a_candidates_verdict(public_run):
    add_candidate(
        public_run,
        1,
        {"model_new.py": "x = 1\n"},
        eager_ms=1.0,
        compile_ms=0.8,
        candidate_ms=0.5,
        speedup_vs_eager=2.0,
        speedup_vs_compile=1.6,
        sol_ms=0.1,
        sol_fraction=0.2,
    )
    r = Client().get(f"/runs/{public_run.pk}/candidates/1/")
    page = r.content.decode()
    assert r.status_code == 200
    assert "matches the reference" in page
    assert "0.5000 ms" in page and "1.600×" in page and "20%" in page
    assert f'href="/runs/{public_run.pk}/candidates/1/bundle.zip"' in page


def test_it_shows_violations_and_errors(public_run):
    candidate = add_candidate(public_run, 1, {"model_new.py": "x = 1\n"}, verified=False)
    candidate.verdict["verify"]["violations"] = [
        {"code": "torch_in_forward", "detail": "aten::relu ran <inside> forward"}
    ]
    candidate.verdict["verify"]["error"] = "Traceback ...\nRuntimeError: boom"
    candidate.save()
    page = Client().get(f"/runs/{public_run.pk}/candidates/1/").content.decode()
    assert "torch_in_forward" in page and "aten::relu ran &lt;inside&gt; forward" in page
    assert "RuntimeError: boom" in page
    assert "not verified" in page


def test_the_candidates_table_says_why_beside_verified_and_has_no_empty_column(public_run):
    """Known-bad: a "Problem found" column of its own, empty for every candidate that passed."""
    add_candidate(public_run, 1, {"model_new.py": "x = 1\n"}, speedup_vs_eager=1.2)
    failed = add_candidate(public_run, 2, {"model_new.py": "x = 2\n"}, verified=False)
    failed.verdict["verify"]["violations"] = [{"code": "mismatch", "detail": "trial 0 <off>"}]
    failed.save()
    page = Client().get(f"/runs/{public_run.pk}/").content.decode()
    table = page[page.index('<table class="data" id="candidates">') :]
    table = table[: table.index("</table>")]
    assert "Problem found" not in table
    assert len(re.findall(r"<th[ >]", table)) == 5 and table.count('<tr data-seq="') == 2
    rows = table.split('<tr data-seq="')[1:]
    assert all(row.count("<td") == 5 for row in rows)
    assert 'data-field="issue"' not in rows[0]
    issue = 'class="no">no</span> <span class="mono small" data-field="issue">'
    assert issue + "mismatch: trial 0 &lt;off&gt;</span>" in rows[1]


def test_it_escapes_candidate_sources(public_run):
    add_candidate(public_run, 1, {"model_new.py": "x = 1\n"})
    add_candidate(
        public_run, 2, {"model_new.py": f"# {SCRIPT}\nx = 1\n", "kernels/k.cu": f"// {SCRIPT}\n"}
    )
    page = Client().get(f"/runs/{public_run.pk}/candidates/2/").content.decode()
    assert SCRIPT not in page
    assert ESCAPED in page


def test_it_diffs_each_file_against_the_previous_candidate(public_run):
    add_candidate(public_run, 1, {"model_new.py": "a = 1\nb = 2\n", "kernels/old.cu": "old\n"})
    add_candidate(public_run, 2, {"model_new.py": "a = 1\nb = 3\n", "kernels/new.cu": "new\n"})
    page = Client().get(f"/runs/{public_run.pk}/candidates/2/").content.decode()
    assert "Changes since candidate 1" in page
    assert '<span class="del">-b = 2</span>' in page
    assert '<span class="add">+b = 3</span>' in page
    assert '<span class="add">+new</span>' in page  # a new file
    assert "removed since candidate 1" in page and '<span class="del">-old</span>' in page
    first = Client().get(f"/runs/{public_run.pk}/candidates/1/").content.decode()
    assert "Changes since" not in first


def test_it_hides_candidates_of_a_private_run(private_run, alice, charlie):
    add_candidate(private_run, 1, {"model_new.py": "x = 1\n"})
    url = f"/runs/{private_run.pk}/candidates/1/"
    assert logged_in(alice).get(url).status_code == 200
    assert logged_in(charlie).get(url).status_code == 404
    assert Client().get(url).status_code == 404
    assert logged_in(alice).get(f"/runs/{private_run.pk}/candidates/2/").status_code == 404


# ---- bundles ------------------------------------------------------------------------------


def test_it_downloads_the_best_candidate_of_a_public_run(public_run):
    make_best(public_run, add_candidate(public_run, 1, {"model_new.py": "x = 1\n"}))
    r = Client().get(f"/runs/{public_run.pk}/bundle.zip")
    assert r.status_code == 200
    assert r["Content-Type"] == "application/zip"
    name = f"kernelarena-run{public_run.pk}-candidate1.zip"
    assert r["Content-Disposition"] == f'attachment; filename="{name}"'
    r = Client().get(f"/runs/{public_run.pk}/candidates/1/bundle.zip")
    assert r.status_code == 200 and r.content.startswith(b"PK")


def test_it_offers_no_bundle_of_a_candidate_that_did_not_verify(public_run):
    add_candidate(public_run, 1, {"model_new.py": "x"}, verified=False)
    r = Client().get(f"/runs/{public_run.pk}/candidates/1/bundle.zip")
    assert r.status_code == 404 and "did not verify" in r.content.decode()


def test_it_says_when_there_is_no_verified_candidate(public_run):
    r = Client().get(f"/runs/{public_run.pk}/bundle.zip")
    assert r.status_code == 404
    assert "has no verified candidate" in r.content.decode()
    make_best(public_run, add_candidate(public_run, 1, {"model_new.py": "x"}, verified=False))
    assert Client().get(f"/runs/{public_run.pk}/bundle.zip").status_code == 404


def test_it_hides_the_bundles_of_a_private_run(private_run, alice, charlie):
    make_best(private_run, add_candidate(private_run, 1, {"model_new.py": "x = 1\n"}))
    for url in (
        f"/runs/{private_run.pk}/bundle.zip",
        f"/runs/{private_run.pk}/candidates/1/bundle.zip",
    ):
        assert logged_in(charlie).get(url).status_code == 404
        assert Client().get(url).status_code == 404
        assert logged_in(alice).get(url).status_code == 200


# ---- every figure has its definition one hover away ------------------------------------------


def untitled_figure_labels(page: str) -> list[str]:
    """The <dt> labels and numeric column heads that carry no title (the hover definition)."""
    tags = re.findall(r"<dt(?:\s[^>]*)?>[^<]*|<th class=\"num\"[^>]*>[^<]*", page)
    return [tag for tag in tags if "title=" not in tag.split(">")[0]]


def test_every_figure_of_a_run_and_a_candidate_is_defined_on_hover(public_run):
    best = add_candidate(
        public_run,
        1,
        {"model_new.py": "x = 1\n"},
        eager_ms=1.0,
        compile_ms=0.8,
        candidate_ms=0.5,
        spread=0.004,
        speedup_vs_eager=2.0,
        speedup_vs_compile=1.6,
        sol_ms=0.1,
        sol_fraction=0.2,
    )
    make_best(public_run, best)
    Grade.objects.create(
        run=public_run,
        candidate=best,
        status=GradeStatus.RANKED,
        secret_seeds=3,
        candidate_ms=0.5,
        speedup_vs_eager=2.0,
        speedup_vs_compile=1.6,
        sol_fraction=0.2,
    )
    run_page = Client().get(f"/runs/{public_run.pk}/").content.decode()
    candidate_page = Client().get(f"/runs/{public_run.pk}/candidates/1/").content.decode()
    # Its correctness and timing panels (the environment and protocol below are settings).
    timing = candidate_page.index("<h2>Timing</h2>")
    candidate_page = candidate_page[
        candidate_page.index("<h2>Correctness</h2>") : candidate_page.index("</section>", timing)
    ]
    # Labels that are not figures (who, when, what) need no definition.
    plain = (
        "agent",
        "GPU type",
        "protocol",
        "started by",
        "started",
        "finished",
        "graded",
        "result",
    )
    for page in (run_page, candidate_page):
        missing = [
            t for t in untitled_figure_labels(page) if t.split(">", 1)[1].strip() not in plain
        ]
        assert missing == []
    assert 'title="speedup over eager PyTorch' in run_page
    assert "interquartile range" in candidate_page
    # "spread 0.004" says what it is where it is shown, not only in the label's hover.
    spread = re.search(
        r'<span class="muted" data-field="spread" title="([^"]*)">([^<]*)<', candidate_page
    )
    assert "interquartile range" in spread.group(1)
    assert spread.group(2) == "(spread 0.004: interquartile range of its times / median)"
