"""gpu_workers.regrade: a run's best candidate is verified and timed again in a fresh session
with secret seeds before it counts. The real harness on the cpu target (compiler, sandbox,
timing) and the real database; the planted cheat passes the public checks and is caught."""

from __future__ import annotations

import pytest

from gpu_workers import regrade
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.runner import problem as harness_problem
from gpu_workers.harness.session import Session
from tests.conftest import problem_source
from tests.gpu_workers.test_agent_run import fixture_files
from tests.webapp.conftest import make_problem
from webapp import dispatch
from webapp.leaderboard import grading
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.runs.models import Candidate, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    monkeypatch.setitem(dispatch.SENDERS, "regrade_run", lambda *args: None)


def public_first_values(source: str, tmp_path) -> list[float]:
    """x[0] of the input sets of the protocol's listed seeds (trials and timing): what a
    kernel fitted to a fixed-seed harness would memorise. The cheat below recognises them."""
    path = tmp_path / "model.py"
    path.write_text(source)
    module = harness_problem.load_module(path, "regrade_probe")
    seeds = [*LOOSE.seeds(), *LOOSE.timing_seeds]
    return [harness_problem.make_inputs(module, s, "cpu")[0].flatten()[0].item() for s in seeds]


def memorising_cheat(known: list[float]) -> dict[str, str]:
    """relu(x) * scale on inputs it has seen, a wrong scale on any other: a kernel fitted to the
    public test set."""
    files = fixture_files("good_relu_scale")
    table = ", ".join(f"{v!r}f" for v in known)
    kernel = files["kernels/relu_scale.cpp"]
    kernel = kernel.replace(
        "  if (block <= 0) block = 4096;",
        f"  static const float seen[] = {{{table}}};\n"
        "  bool known = false;\n"
        "  for (float v : seen) known = known || x[0] == v;\n"
        "  if (!known) scale *= 0.5f;\n"
        "  if (block <= 0) block = 4096;",
    )
    return {**files, "kernels/relu_scale.cpp": kernel}


def finished_run(alice, source: str, files: dict[str, str], verdict: dict | None = None) -> Run:
    """A run that ended with `files` as its verified best candidate, as the agent's own checks
    left it (`verdict`: the run's own verdict on it, with its timing)."""
    problem = make_problem(alice, source, public=True)
    run = Run.objects.create(
        problem=problem,
        owner=alice,
        agent="scripted-demo",
        gpu_type="cpu",
        protocol="loose",
        status=RunStatus.SUCCEEDED,
    )
    candidate = Candidate.objects.create(
        run=run, seq=1, sources=files, verified=True, speedup_vs_compile=1.0, verdict=verdict or {}
    )
    Run.objects.filter(pk=run.pk).update(best_candidate=candidate, best_speedup_vs_compile=1.0)
    run.refresh_from_db()
    return run


def graded(run: Run) -> Grade:
    assert grading.enqueue_regrade(run).status == GradeStatus.PENDING
    regrade.regrade(run.pk, "test-worker")
    return Grade.objects.get(run=run)


@pytest.mark.usefixtures(
    "drift_of_a_quiet_host", "regrade_of_a_quiet_host"
)  # ranked, whatever the host
def test_a_clean_candidate_is_ranked_with_its_new_timing(alice):
    run = finished_run(alice, problem_source("relu_scale"), fixture_files("good_relu_scale"))
    grade = graded(run)
    assert grade.status == GradeStatus.RANKED, grade.reasons
    assert grade.reasons == [] and grade.secret_seeds == regrade.SECRET_SEEDS
    assert grade.candidate_ms > 0 and grade.speedup_vs_eager > 0 and grade.speedup_vs_compile > 0
    assert grade.verdict["verify"]["trials"] == LOOSE.trials + regrade.SECRET_SEEDS
    # The verdict says how many secret seeds there were, never which.
    assert grade.verdict["protocol"]["secret_seeds"] == regrade.SECRET_SEEDS
    assert grade.worker == "test-worker" and grade.graded is not None


def test_a_kernel_fitted_to_the_listed_seeds_fails_every_verify(alice, tmp_path):
    """The judge draws every trial's seed when the trial starts, so a kernel that memorised
    the inputs of the protocol's listed seeds fails the agent's own verify, not only the
    re-grade (before the judge, it passed the agent's checks and only the re-grade caught it)."""
    source = problem_source("relu_scale")
    cheat = memorising_cheat(public_first_values(source, tmp_path))
    with Session(source, device="cpu", protocol=LOOSE) as session:  # what the agent saw
        for path, text in cheat.items():
            session.write_file(path, text)
        public = session.evaluate()
    assert not public["verify"]["ok"], public
    assert {v["code"] for v in public["verify"]["violations"]} == {"mismatch"}

    grade = graded(finished_run(alice, source, cheat))
    assert grade.status == GradeStatus.UNDER_REVIEW
    assert "secret" in grade.reasons[0]
    assert grade.reasons[1].startswith("mismatch: trial 0 "), grade.reasons
    assert grade.candidate_ms is None  # never timed, so never a number to rank


def test_a_time_under_the_speed_of_light_floor_is_held(alice):
    files = fixture_files("bad_impossible_speed")
    grade = graded(finished_run(alice, problem_source("matmul_rowsum"), files))
    assert grade.status == GradeStatus.UNDER_REVIEW
    assert any(reason.startswith("impossible_speed") for reason in grade.reasons), grade.reasons


def test_a_violation_is_held_with_its_code(alice):
    files = fixture_files("bad_torch_in_forward")
    grade = graded(finished_run(alice, problem_source("relu_scale"), files))
    assert grade.status == GradeStatus.UNDER_REVIEW
    codes = {reason.split(":")[0] for reason in grade.reasons}
    assert codes & {"torch_compute", "torch_in_forward"}, grade.reasons


def test_a_graded_run_is_not_graded_twice(alice):
    run = finished_run(alice, problem_source("relu_scale"), fixture_files("good_relu_scale"))
    graded(run)
    assert regrade.regrade(run.pk, "late-redelivery").endswith("has no pending grade")
    assert Grade.objects.get(run=run).worker == "test-worker"


def test_a_run_without_a_verified_candidate_has_nothing_to_grade(alice):
    problem = make_problem(alice, problem_source("relu_scale"), public=True)
    run = Run.objects.create(problem=problem, owner=alice, agent="x", gpu_type="cpu")
    assert grading.enqueue_regrade(run) is None and not Grade.objects.exists()


@pytest.mark.parametrize(
    ("verdict", "status", "reason"),
    [
        ({"compile": {"ok": False, "log": "a\nerror: x"}}, "under_review", "no longer compiles"),
        ({"error": "the re-grade could not run: disk full"}, "under_review", "disk full"),
        (
            {
                "compile": {"ok": True},
                "verify": {"ok": True, "violations": []},
                "profile": {"ok": False, "violations": [{"code": "async_work", "detail": "d"}]},
            },
            "under_review",
            "async_work: d",
        ),
        (
            {"compile": {"ok": True}, "verify": {"ok": True}, "profile": {"ok": True}},
            "ranked",
            None,
        ),
    ],
)
def test_judge(verdict, status, reason):
    got_status, reasons = regrade.judge(verdict)
    assert got_status == status
    assert (reason is None and reasons == []) or any(reason in r for r in reasons)


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # ranked but for the disagreement
def test_a_regrade_far_from_the_runs_own_figure_is_measured_again_and_held(alice, client):
    """The run's stored figure is made 1000 ms (the kernel takes well under 1 ms): the re-grade
    disagrees, measures again, still disagrees, and holds the result with both figures.
    Known-bad, before the comparison: ranked at the re-grade's figure, the run's never
    mentioned."""
    far_off = {"candidate_ms": 1000.0, "speedup_vs_eager": 0.0001, "speedup_vs_compile": 0.0001}
    run = finished_run(
        alice,
        problem_source("relu_scale"),
        fixture_files("good_relu_scale"),
        verdict={"profile": {"ok": True, **far_off}},
    )
    Run.objects.filter(pk=run.pk).update(
        best_speedup_vs_eager=0.0001, best_speedup_vs_compile=0.0001
    )
    grade = graded(run)

    assert grade.status == GradeStatus.UNDER_REVIEW
    assert "repeatability" in grade.reasons[0] and "measured 2 times" in grade.reasons[0]
    agreement = grade.agreement
    assert agreement["agrees"] is False and agreement["limit"] == LOOSE.repeatability
    assert agreement["run"] == far_off
    assert len(agreement["regrade"]) == 2
    assert grade.candidate_ms == agreement["regrade"][-1]["candidate_ms"] < 1  # the counted one

    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="regrade-disagreement"' in page and "under review" in page
    for measured_by in ("run", "regrade-1", "regrade-2"):
        assert f'data-measured-by="{measured_by}"' in page
    assert "1000.0000 ms" in page
    # The header's best vs eager is the re-grade's figure, marked so; never the run's 0.00×.
    headline = page.split('data-field="best-eager"')[1].split("</dd>")[0]
    assert f"{grade.speedup_vs_eager:.2f}×" in headline and "re-graded" in headline
    listed = client.get("/runs/").content.decode()  # My runs: the same figure
    assert f"{grade.speedup_vs_eager:.2f}×" in listed and "0.00×" not in listed


@pytest.mark.parametrize(
    ("own_ms", "measured_ms", "disagree"),
    [(1.0, 1.05, False), (1.0, 1.1, False), (1.0, 1.2, True), (1.2, 1.0, True), (None, 1.0, False)],
)
def test_disagree_is_beyond_the_repeatability_either_way(own_ms, measured_ms, disagree):
    own = None if own_ms is None else {"candidate_ms": own_ms}
    assert regrade.disagree(own, {"candidate_ms": measured_ms}, 1.1) is disagree


def test_a_run_figure_close_to_the_regrade_is_ranked_with_both_kept():
    own = {"candidate_ms": 1.0, "speedup_vs_eager": 2.0, "speedup_vs_compile": 1.0}
    near = {"candidate_ms": 1.04, "speedup_vs_eager": 1.92, "speedup_vs_compile": 0.96}
    agreement = regrade._agreement(own, [near], 1.1)
    assert agreement == {"limit": 1.1, "run": own, "regrade": [near], "agrees": True}
    assert regrade._agreement(None, [near], 1.1) == {}  # nothing of the run's to compare
