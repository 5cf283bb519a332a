"""Results files (webapp.leaderboard.results_file): a suite's results exported on the host that
measured them and imported anywhere.

The suite is made the way the product makes it: import_suite on a folder "level1" of three
problems, the worker's validation written onto them (two valid, one rejected), baselines on the
GPU type "cpu", a fusion evaluation started by start_evaluation whose runs then end as a worker
ends them (one ranked, one failed), and alice's submission started by start_submission and
ranked. Bob's private problem, with a submission of his, is outside the suite and must never
leave the instance.
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from tests.conftest import candidate_dir
from tests.webapp.conftest import make_problem
from webapp import dispatch, serve
from webapp.leaderboard import metrics
from webapp.leaderboard.evaluation import start_evaluation
from webapp.leaderboard.models import Grade, GradeStatus, Instance
from webapp.leaderboard.results_file import (
    IMPORT_USERNAME,
    ResultsFileError,
    checkout_commit,
    export_results,
    import_results,
    import_results_folder,
    write_results_file,
)
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs.lifecycle import RunRefused, start_submission
from webapp.runs.models import Candidate, Run, RunStatus
from webapp.suites import progress
from webapp.suites.importing import import_suite
from webapp.suites.models import Baseline, Evaluation, ReportedResult, Suite, SuiteProblem

GPU = "cpu"
SUITE = "kb-level1"
MODELS = (User, Problem, Suite, SuiteProblem, Baseline, Evaluation, Run, Candidate, Grade)
MODELS += (ReportedResult,)


def sources(relu_scale: str) -> dict[str, str]:
    return {f"{n}_Variant{n}.py": f"{relu_scale}\n# variant {n}\n" for n in (1, 2, 3)}


@pytest.fixture
def folder(tmp_path, relu_scale):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name, text in sources(relu_scale).items():
        (level / name).write_text(text)
    return level


def good_files() -> dict[str, str]:
    root = candidate_dir("cpu", "good_relu_scale")
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def validated(problem: Problem, n: int) -> None:
    """What the validation worker writes."""
    problem.status = ProblemStatus.VALID
    problem.eager_ms, problem.compile_ms, problem.sol_ms = 2.0 * n, 1.5 * n, 0.5 * n
    problem.flops, problem.bytes_moved, problem.validated_on = 10**9 * n, 10**8 * n, GPU
    problem.save()


def ended(run: Run, *, speedup: float | None, status: str = RunStatus.SUCCEEDED) -> None:
    """What a worker writes when a run ends, and its re-grade (speedup None: no candidate)."""
    run.status, run.started, run.finished = status, timezone.now(), timezone.now()
    run.prompt_tokens, run.completion_tokens, run.cost_dollars, run.gpu_seconds = 900, 100, 0.5, 30
    if speedup is None:
        run.error = "no candidate verified"
        run.save()
        return
    candidate = Candidate.objects.create(
        run=run, seq=1, sources=good_files(), verified=True, speedup_vs_compile=speedup
    )
    run.best_candidate, run.best_speedup_vs_compile = candidate, speedup
    run.save()
    Grade.objects.create(
        run=run,
        candidate=candidate,
        status=GradeStatus.RANKED,
        verdict={"verify": {"ok": True}},
        candidate_ms=1.0 / speedup,
        speedup_vs_compile=speedup,
        speedup_vs_eager=speedup * 1.5,
        sol_fraction=0.4,
        max_rel_err=1e-6,
        secret_seeds=3,
        graded=timezone.now(),
    )


@pytest.fixture
def suite(folder, alice, bob, relu_scale) -> Suite:
    suite, _ = import_suite(folder, SUITE)
    entries = list(suite.entries.select_related("problem").order_by("position"))
    for n, entry in enumerate(entries[:2], start=1):
        validated(entry.problem, n)
        Baseline.objects.create(
            problem=entry.problem,
            gpu_type=GPU,
            protocol=suite.protocol,
            eager_ms=2.0 * n,
            compile_ms=1.5 * n,
            compile_max_autotune_ms=1.6 * n,
            sol_ms=0.5 * n,
            measurements=[{"eager_ms": 2.0 * n}],
            environment={"gpu": "cpu", "torch": "2.11.0"},
            measured=timezone.now(),
        )
    entries[2].problem.status = ProblemStatus.REJECTED
    entries[2].problem.reasons = ["its output does not depend on its inputs"]
    entries[2].problem.save()
    evaluation = start_evaluation(suite, "fusion", GPU, max_turns=4)
    first, second = evaluation.runs.order_by("problem__suite_entries__position")
    ended(first, speedup=2.0)
    ended(second, speedup=None, status=RunStatus.FAILED)
    ended(start_submission(alice, entries[0].problem, good_files(), GPU, "loose"), speedup=1.25)
    private = make_problem(bob, f"{relu_scale}\n# bob's secret\n")
    ended(start_submission(bob, private, good_files(), GPU, "loose"), speedup=3.0)
    return suite


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def comparable(board: dict) -> dict:
    """The board without what an import must change: ids, and people's names marked imported."""
    rows = [
        {**row, "evaluation": None, "entrant": row["entrant"].removesuffix(" (imported)")}
        for row in board["rows"]
    ]
    volatile = ("id", "suite_id", "created")
    reported = [{k: v for k, v in r.items() if k not in volatile} for r in board["reported"]]
    reported.sort(key=lambda r: r["entrant"])
    review = [{**r, "run": None} for r in board["under_review"]]
    return {**board, "rows": rows, "reported": reported, "under_review": review}


def empty_database() -> None:
    """What a fresh instance has: nothing (cascades take runs, grades, baselines, entries), and
    an identity of its own."""
    Suite.objects.all().delete()
    Problem.objects.all().delete()
    User.objects.all().delete()
    another_database()
    assert not any(counts().values())


def another_database() -> None:
    """This database as if it were another one: its identity made again."""
    Instance.objects.all().delete()


def exported(suite: Suite, **options) -> dict:
    # Through JSON, as a file carries it.
    return json.loads(json.dumps(export_results(suite, GPU, origin="gpu-host", **options)))


# ---- the round trip ---------------------------------------------------------------------------


def test_it_shows_the_same_board_after_export_and_import_into_an_empty_database(suite):
    before = metrics.board(suite, GPU)
    data = exported(suite)
    empty_database()

    summary = import_results(data)

    after = metrics.board(Suite.objects.get(name=SUITE), GPU)
    assert comparable(after) == comparable(before)
    assert [row["entrant"] for row in after["rows"]] == [
        "fusion",
        "alice (imported)",
        metrics.COMPILER,
    ]
    assert (summary.problems, summary.problems_added, summary.evaluations, summary.runs) == (
        3,
        3,
        1,
        3,
    )


def test_it_marks_imported_work_as_imported_and_final(suite):
    data = exported(suite)
    empty_database()
    import_results(data)

    runs = Run.objects.all()
    assert {run.status for run in runs} == {RunStatus.SUCCEEDED, RunStatus.FAILED}
    assert all(run.imported_from.startswith(f"gpu-host/{data['instance']}/run/") for run in runs)
    evaluation = Evaluation.objects.get()
    assert evaluation.imported_from.startswith(f"gpu-host/{data['instance']}/evaluation/")
    assert evaluation.owner.username == IMPORT_USERNAME
    owners = User.objects.filter(runs__in=runs).distinct()
    assert sorted(owners.values_list("username", flat=True)) == [
        "alice (imported)",
        IMPORT_USERNAME,
    ]
    assert not any(owner.is_active or owner.has_usable_password() for owner in owners)
    assert {b.environment["imported_from"] for b in Baseline.objects.all()} == {"gpu-host"}


def test_it_keeps_candidates_grades_and_validation(suite):
    original = Run.objects.get(evaluation__isnull=False, status=RunStatus.SUCCEEDED)
    data = exported(suite)
    empty_database()
    import_results(data)

    run = Run.objects.get(evaluation__isnull=False, status=RunStatus.SUCCEEDED)
    assert run.best_candidate.sources == good_files()
    assert (run.grade.status, run.grade.secret_seeds, run.grade.speedup_vs_compile) == (
        GradeStatus.RANKED,
        3,
        2.0,
    )
    assert run.created == original.created
    valid = Problem.objects.get(title=f"{SUITE}/1_Variant1")
    assert (valid.status, valid.flops, valid.validated_on, valid.source) == (
        ProblemStatus.VALID,
        10**9,
        GPU,
        "",
    )
    rejected = Problem.objects.get(title=f"{SUITE}/3_Variant3")
    assert rejected.reasons == ["its output does not depend on its inputs"]


# ---- idempotence ------------------------------------------------------------------------------


def test_importing_the_same_file_twice_changes_nothing(suite):
    data = exported(suite)
    empty_database()
    import_results(data)
    stored, board = counts(), comparable(metrics.board(Suite.objects.get(), GPU))

    summary = import_results(data)

    assert counts() == stored
    assert comparable(metrics.board(Suite.objects.get(), GPU)) == board
    assert (summary.problems_added, summary.runs_added) == (0, 0)


def test_a_newer_export_of_the_same_suite_updates_in_place(suite):
    older = exported(suite)
    empty_database()
    import_results(older)
    stored = counts()
    newer = copy.deepcopy(older)
    newer["evaluations"][0]["runs"][0]["grade"]["speedup_vs_compile"] = 4.0

    import_results(newer)

    assert counts() == stored
    assert Grade.objects.get(run__evaluation__isnull=False).speedup_vs_compile == 4.0


def test_a_database_never_imports_its_own_export(suite):
    """What it exported is here and at least as new: importing it back (a lent machine's stack
    imports the committed files as it starts, its database carried from the last call) must not
    add a second evaluation, nor undo work done since. Known-bad beside it: the same file in
    another database adds the copies, marked."""
    stored, board = counts(), metrics.board(suite, GPU)
    data = exported(suite)

    summary = import_results(data)

    assert summary.own and "own export, nothing to import" in summary.line()
    assert counts() == stored and metrics.board(suite, GPU) == board
    another_database()
    assert not import_results(data).own
    assert Evaluation.objects.count() == 2 and Run.objects.count() == stored["Run"] + 3


def test_the_keys_of_two_databases_on_hosts_of_one_name_differ(suite):
    """Every lent machine is called "vm": runs and evaluations are keyed by the database too, or
    a second machine's evaluation 1 would overwrite the first's wherever both are imported."""
    first = exported(suite)
    another_database()
    second = exported(suite)
    assert first["origin"] == second["origin"] == "gpu-host"
    assert first["evaluations"][0]["key"] != second["evaluations"][0]["key"]
    empty_database()
    import_results(first)
    import_results(second)
    assert Evaluation.objects.count() == 2


def test_a_baseline_measured_here_after_the_export_is_kept(suite):
    """A machine measured again after the file was exported (the file's row still waited): the
    older file must not undo it. Known-bad beside it: a row here older than the file's is
    replaced."""
    data = exported(suite)
    another_database()
    row = Baseline.objects.filter(eager_ms__isnull=False).order_by("problem").first()
    later = timezone.now() + timedelta(hours=1)
    Baseline.objects.filter(pk=row.pk).update(eager_ms=9.0, requested=later, measured=later)

    summary = import_results(data)

    assert Baseline.objects.get(pk=row.pk).eager_ms == 9.0
    assert "1 newer here kept" in summary.line()
    earlier = timezone.now() - timedelta(days=1)
    Baseline.objects.filter(pk=row.pk).update(requested=earlier, measured=earlier)
    import_results(data)
    assert Baseline.objects.get(pk=row.pk).eager_ms == row.eager_ms


def test_an_imported_evaluation_goes_on_where_its_machine_stopped(suite, folder):
    """A lent machine was lost with runs unfinished; the next one's database comes from the
    results file (ended runs only, a pending re-grade left out). `evaluate_suite --resume` queues
    a run of the same evaluation for each problem it has none of, and the re-grade of an ended
    run that has none, once each. Once the agent changed, nothing of it can go on: its queued
    runs are cancelled saying why, its ended ones stay, and a new evaluation starts."""
    Grade.objects.filter(run__evaluation__isnull=False).update(status=GradeStatus.PENDING)
    data = exported(suite)
    empty_database()
    import_results(data)
    import_suite(folder, SUITE)  # the sources, as gpu_suite_run.sh attaches them
    third = Problem.objects.get(title=f"{SUITE}/3_Variant3")
    validated(third, 3)
    evaluation = Evaluation.objects.get()
    resume = ("evaluate_suite", "--suite", SUITE, "--agent", "fusion", "--gpu", GPU, "--resume")

    call_command(*resume)

    queued = evaluation.runs.filter(status=RunStatus.QUEUED)
    assert [run.problem for run in queued] == [third] and evaluation.runs.count() == 3
    regraded = Grade.objects.get(run__evaluation=evaluation)
    assert regraded.status == GradeStatus.PENDING and regraded.run.best_candidate.verified
    call_command(*resume)
    assert evaluation.runs.count() == 3 and Evaluation.objects.count() == 1
    assert Grade.objects.filter(run__evaluation=evaluation).count() == 1
    identity = {**evaluation.agent_identity, "fingerprint": "another agent"}
    Evaluation.objects.filter(pk=evaluation.pk).update(agent_identity=identity)
    ended = set(evaluation.runs.exclude(status=RunStatus.QUEUED).values_list("pk", "status"))
    out = io.StringIO()

    call_command(*resume, stdout=out)

    assert (
        "changed since evaluation" in out.getvalue() and "1 queued runs cancelled" in out.getvalue()
    )
    (cancelled,) = evaluation.runs.filter(status=RunStatus.CANCELLED)
    assert cancelled.problem == third and "changed since evaluation" in cancelled.error
    assert cancelled.events.order_by("seq").last().payload["run_status"] == "cancelled"
    assert ended <= set(evaluation.runs.values_list("pk", "status"))  # the ended runs stay
    newer = Evaluation.objects.exclude(pk=evaluation.pk).get()
    assert newer.runs.filter(status=RunStatus.QUEUED).count() == 3
    call_command(*resume)  # and goes on with the new one from then on
    assert Evaluation.objects.count() == 2 and newer.runs.count() == 3


def test_resume_starts_an_evaluation_where_there_is_none(suite):
    Evaluation.objects.all().delete()
    call_command("evaluate_suite", "--suite", SUITE, "--agent", "fusion", "--gpu", GPU, "--resume")
    assert Evaluation.objects.get().runs.count() == 2  # the two valid problems


# ---- bad files are refused and nothing changes ------------------------------------------------


def refused(data: dict, expected: str) -> None:
    stored = counts()
    grades = list(Grade.objects.values_list("speedup_vs_compile", flat=True).order_by("pk"))
    with pytest.raises(ResultsFileError) as caught:
        import_results(data)
    assert expected in str(caught.value)
    assert counts() == stored
    assert list(Grade.objects.values_list("speedup_vs_compile", flat=True).order_by("pk")) == grades


@pytest.fixture
def imported(suite) -> dict:
    data = exported(suite, with_sources=True)
    empty_database()
    import_results(data)
    return data


def test_it_refuses_another_format_version(imported):
    data = {**imported, "version": 99}
    refused(data, "format version 99 is not one this instance reads")


def test_it_refuses_a_missing_field_and_names_it(imported):
    data = copy.deepcopy(imported)
    del data["problems"][1]["status"]
    refused(data, "problems[1]: missing status")
    del data["evaluations"][0]["runs"][0]["gpu_seconds"]
    data["problems"][1]["status"] = "valid"
    refused(data, "evaluations[0].runs[0]: missing gpu_seconds")


def test_it_refuses_a_problem_whose_sha256_disagrees_with_its_source(imported):
    data = copy.deepcopy(imported)
    data["problems"][0]["source"] += "\n# edited after export\n"
    data["evaluations"][0]["runs"][0]["grade"]["speedup_vs_compile"] = 9.0
    refused(data, "problems[0] (1_Variant1): its source's sha256 is")


def test_a_conflict_found_while_writing_undoes_the_whole_import(imported):
    """A problem unknown here whose name the suite already gives another problem: found only
    after the new problem is stored, so the transaction must take it back."""
    data = copy.deepcopy(imported)
    entry = data["problems"][2]
    entry["sha256"], entry["source"] = "0" * 64, ""
    data["evaluations"][0]["runs"][0]["grade"]["speedup_vs_compile"] = 9.0
    refused(data, "3_Variant3 (sha256 000000000000) does not match suite kb-level1")


def test_it_refuses_a_run_that_is_not_final(imported):
    data = copy.deepcopy(imported)
    data["submissions"][0]["status"] = "queued"
    refused(data, "submissions[0]: status 'queued' is not final")


# ---- sources --------------------------------------------------------------------------------


def test_a_problem_imported_without_source_gets_it_from_import_suite(suite, folder):
    data = exported(suite)
    assert not any("source" in problem for problem in data["problems"])
    empty_database()
    import_results(data)
    waiting = Problem.objects.get(title=f"{SUITE}/1_Variant1")
    stored = counts()

    imported_suite, files = import_suite(folder, SUITE)

    assert counts() == stored  # no twin problem, entry or reported row
    waiting.refresh_from_db()
    assert waiting.source == (folder / "1_Variant1.py").read_text()
    assert waiting.sha256 == data["problems"][0]["sha256"]
    assert waiting.status == ProblemStatus.VALID  # the file's validation stands
    assert [item.problem for item in files][0] == waiting


def test_a_synthesized_suite_travels_with_its_sources_and_provenance(suite):
    """A synthesized problem has no folder to import_suite it from: its file carries its source
    and provenance unasked, so the next machine measures its baselines and `synthesize` counts it
    as made (the test above is the known-bad beside it: a folder's suite carries no source)."""
    for entry in suite.entries.all():
        entry.provenance = {"composer": "chain-v1", "seed": 1, "index": entry.position}
        entry.save()
    data = exported(suite)
    assert all(problem["source"] and problem["provenance"] for problem in data["problems"])
    empty_database()

    import_results(data)

    imported = Suite.objects.get(name=SUITE)
    assert imported.entries.filter(provenance__seed=1).count() == 3
    assert all(entry.problem.source for entry in imported.entries.select_related("problem"))


def test_it_refuses_a_provenance_that_is_not_an_object(suite):
    data = exported(suite)
    data["problems"][0]["provenance"] = "chain-v1"
    empty_database()
    with pytest.raises(ResultsFileError, match="provenance must be an object"):
        import_results(data)
    assert not Suite.objects.exists()


def test_a_suite_exported_mid_validation_goes_on_once_its_sources_come(
    suite, folder, monkeypatch, django_capture_on_commit_callbacks
):
    """A suite measured on lent machines is exported after each call and goes on from the file
    on the next machine: the problems the file had not validated are sent once import_suite
    gives them their sources (known-bad beside them: the validated ones are not sent again)."""
    sent: list[int] = []
    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", sent.append)
    last = suite.entries.order_by("position").last().problem
    Problem.objects.filter(pk=last.pk).update(status=ProblemStatus.PENDING, reasons=[])
    data = exported(suite)
    assert [p["status"] for p in data["problems"]] == ["valid", "valid", "pending"]
    empty_database()
    import_results(data)
    # the suite page and the commands say why nothing moves, and wait for no worker
    waiting = progress.validation(Suite.objects.get())
    assert waiting.line("validation") == (
        "validation: 2 of 3 done, 1 waiting for their source (import_suite attaches it)"
    )
    assert waiting.workable_left == 0 and waiting.seconds_left() is None

    with django_capture_on_commit_callbacks(execute=True):
        import_suite(folder, SUITE)

    pending = Problem.objects.get(sha256=data["problems"][2]["sha256"])
    assert sent == [pending.pk]
    assert pending.source and pending.status == ProblemStatus.PENDING
    assert progress.validation(Suite.objects.get()).workable_left == 1


def test_a_problem_without_its_source_shows_but_never_runs(suite):
    data = exported(suite)
    empty_database()
    import_results(data)
    waiting = Problem.objects.get(title=f"{SUITE}/1_Variant1")
    alice = User.objects.create_user("alice")

    assert Client().get(f"/problems/{waiting.pk}/").status_code == 200
    page = Client().get(f"/suites/{SUITE}/?gpu_type={GPU}")
    assert page.status_code == 200 and "1_Variant1" in page.content.decode()
    with pytest.raises(RunRefused, match="without its source"):
        start_submission(alice, waiting, good_files(), GPU, "loose")
    with pytest.raises(RunRefused, match="without their source"):
        start_evaluation(Suite.objects.get(), "fusion", GPU)
    assert not Run.objects.filter(imported_from="").exists()


def test_baselines_wait_for_the_sources_that_import_suite_attaches(
    suite, folder, monkeypatch, django_capture_on_commit_callbacks
):
    """A suite carried to a fresh machine as a results file holds its problems by sha256 alone:
    asking for their baselines is refused with the command that attaches the sources, and what
    the file brought stays as it was (known-bad beside it: once import_suite ran, they are
    sent)."""
    sent: list[int] = []
    monkeypatch.setitem(dispatch.SENDERS, "measure_baselines", lambda pk, *_: sent.append(pk))
    data = exported(suite)
    empty_database()
    import_results(data)
    brought = list(Baseline.objects.values_list("pk", "eager_ms", "error", "requested"))
    ask = ("benchmark_baselines", "--suite", SUITE, "--gpu", GPU, "--no-wait")

    with pytest.raises(CommandError, match=f"import_suite FOLDER --name {SUITE}"):
        call_command(*ask)
    assert sent == []
    assert list(Baseline.objects.values_list("pk", "eager_ms", "error", "requested")) == brought

    with django_capture_on_commit_callbacks(execute=True):
        import_suite(folder, SUITE)
    with django_capture_on_commit_callbacks(execute=True):
        call_command(*ask)
    assert sorted(sent) == sorted(Baseline.objects.values_list("pk", flat=True)) and sent


def test_a_private_problem_never_appears_in_an_export(suite, bob):
    secret = Problem.objects.get(owner=bob)
    text = json.dumps(export_results(suite, GPU, with_sources=True))
    assert secret.sha256 not in text and "bob" not in text and "bob's secret" not in text

    SuiteProblem.objects.create(suite=suite, problem=secret, name="9_Secret", position=9)
    with pytest.raises(ResultsFileError, match="holds private problems \\(9_Secret\\)"):
        export_results(suite, GPU)


# ---- reported rows ----------------------------------------------------------------------------


def test_a_kernelbench_suite_gets_the_papers_reported_rows_once(suite, folder):
    rows = ReportedResult.objects.filter(suite=suite)
    assert rows.count() == 4  # CUDA Agent combined and for this level, Opus, Gemini
    import_suite(folder, SUITE)
    assert rows.count() == 4
    level = rows.get(entrant__endswith=f"level {suite.level}")
    assert level.fast_1_0_vs_compile == {1: 1.0, 2: 1.0, 3: 0.92}[suite.level]
    assert level.geomean_speedup_vs_compile is None
    cuda_agent = rows.get(entrant__endswith="levels 1-3 combined")
    assert (cuda_agent.correct_rate, cuda_agent.fast_1_0_vs_compile) == (0.988, 0.968)
    assert cuda_agent.geomean_speedup_vs_compile == 2.11
    assert "levels 1-3 combined" in cuda_agent.note
    assert cuda_agent.url == "https://arxiv.org/abs/2602.24286"
    opus = rows.get(entrant__startswith="Claude Opus 4.5")
    assert opus.geomean_speedup_vs_compile is None and "1.42-1.46x" in opus.note
    board = metrics.board(suite, GPU)
    assert len(board["reported"]) == 4
    assert not {r["entrant"] for r in board["rows"]} & {r.entrant for r in rows}


def test_a_suite_of_no_kernelbench_level_gets_no_reported_rows(db, tmp_path, relu_scale):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "op.py").write_text(relu_scale)
    suite, _ = import_suite(tmp_path / "mine", "mine")
    assert suite.level is None and not suite.reported_results.exists()


# ---- commands and make run ------------------------------------------------------------------


def test_the_commands_export_and_import_a_file(suite, tmp_path, capsys):
    path = tmp_path / "kb-level1-cpu.json"
    call_command("export_results", suite=SUITE, gpu=GPU, output=str(path), origin="gpu-host")
    empty_database()
    call_command("import_results", str(path))
    out = capsys.readouterr().out
    assert "3 problems, 2 baselines, 1 evaluations, 3 runs" in out
    assert "from gpu-host: 3 problems (3 new)" in out

    path.write_text(path.read_text().replace('"version": 1', '"version": 2'))
    with pytest.raises(CommandError, match="format version 2"):
        call_command("import_results", str(path))


def test_the_lines_count_the_baselines_not_measured_yet(suite, tmp_path, capsys):
    """A baseline row is stored when it is asked for, so a file carries requested ones unmeasured:
    export's and import's lines say how many (level 2's file said "83 baselines" with 34 still
    waiting). Known-good beside it: the lines above, all measured, say nothing of the kind."""
    first = Baseline.objects.order_by("pk").first()
    Baseline.objects.filter(pk=first.pk).update(
        eager_ms=None,
        compile_ms=None,
        compile_max_autotune_ms=None,
        sol_ms=None,
        measurements=[],
        measured=None,
    )
    path = tmp_path / "kb-level1-cpu.json"
    call_command("export_results", suite=SUITE, gpu=GPU, output=str(path), origin="gpu-host")
    empty_database()
    call_command("import_results", str(path))
    out = capsys.readouterr().out
    assert out.count("2 baselines (1 not measured yet), 1 evaluations") == 2, out


def test_serve_imports_the_committed_results_once(suite, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    write_results_file(exported(suite), results / "kb-level1-cpu.json")
    (results / "broken.json").write_text("{")
    empty_database()

    lines = serve.import_committed_results(results)
    stored = counts()
    lines += serve.import_committed_results(results)

    assert counts() == stored
    assert len(lines) == 4
    assert lines[0].startswith("results broken.json: not imported: ")
    assert lines[1] == (
        "results kb-level1-cpu.json: suite kb-level1 on cpu (loose) from gpu-host: "
        "3 problems (3 new), 2 baselines, 1 evaluations, 3 runs (3 new)"
    )
    assert lines[3].endswith("3 problems (0 new), 2 baselines, 1 evaluations, 3 runs (0 new)")
    assert metrics.board(Suite.objects.get(), GPU)["rows"][0]["correct"] == 1


def test_serve_imports_the_folder_its_settings_name(suite, tmp_path, settings):
    """A GPU host's suite run names a folder of its own suite's file (KERNELARENA_RESULTS_DIR):
    the stack imports that one, not every committed file (whose waiting baselines would share
    the GPU). Known-bad beside it: by default, the committed files are imported."""
    settings.RESULTS_DIR = tmp_path
    write_results_file(exported(suite), tmp_path / "kb-level1-cpu.json")
    empty_database()

    (line,) = serve.import_committed_results()

    assert line.startswith("results kb-level1-cpu.json: suite kb-level1 on cpu")
    settings.RESULTS_DIR = serve.REPO / "benchmarks" / "results"
    committed = serve.import_committed_results()
    assert len(committed) == len(list(settings.RESULTS_DIR.glob("*.json"))) >= 2


def test_every_committed_results_file_imports(db):
    folder = serve.REPO / "benchmarks" / "results"
    assert all("not imported" not in line for line in import_results_folder(folder))


def test_the_exported_commit_says_when_the_tree_differs_from_it(tmp_path):
    """A lent GPU host is sent the working tree, whose git may hold an older HEAD: the results
    file says "+modified" rather than name a commit the measured code was not."""
    assert checkout_commit(tmp_path) == ""  # no checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "kernel.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "kernel.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert checkout_commit(tmp_path) == head.strip()
    (tmp_path / "kernel.py").write_text("x = 2\n")
    assert checkout_commit(tmp_path) == head.strip() + "+modified"
