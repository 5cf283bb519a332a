"""A suite's measured results on one GPU type and protocol as a JSON file, and such a file
imported into any instance: what a GPU host measured shows on a board anywhere.

The file holds the suite, its problems (name, position, sha256, validation; the source only when
asked, since KernelBench's files are not ours to publish, and always for a synthesized problem,
with its provenance: the composer's text is ours, and no folder holds it to import again), the
baselines, every evaluation with its ended runs (best candidate and re-grade) and people's ended
submissions, the reported rows and the GPU and software environment. Runs and evaluations carry
a key, "<origin>/<instance>/run/<id>", that names where they were measured: the host and the
database (leaderboard.Instance), since every lent machine is called "vm".

Importing is one transaction: the whole file is checked before anything is written, and an error
anywhere leaves the database as it was. Problems are matched by sha256 among the service
account's (the suites' problems); one not here is stored by its sha256, without source if the
file has none, and import_suite attaches the source later. Runs and evaluations are matched by
their key, so importing a file again, or a newer export of the same suite, updates rows in place;
a baseline here that is newer than the file's (measured or requested later) is kept, and a file
this database exported itself is not imported into it (what it holds is here, and as new).
Imported work is owned by system accounts nobody logs in to ("kernelarena-import", and one
"<name> (imported)" per person, so the board keeps people apart), its `imported_from` says where
it came from, and its runs are final: no worker ever takes one.
"""

from __future__ import annotations

import json
import platform
import re
import socket
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import django
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from gpu_workers.harness.problem_source import ProblemError, check_source, source_sha256
from webapp.accounts.service_account import service_account
from webapp.leaderboard.models import MEASURED_FIELDS, Grade, GradeStatus, Instance
from webapp.problems.models import Problem, ProblemStatus, Visibility
from webapp.runs.models import Candidate, Run, RunKind, RunStatus
from webapp.suites.models import Baseline, Evaluation, ReportedResult, Suite, SuiteProblem
from webapp.suites.reported import attach_reported_results

FORMAT = "kernelarena-results"
VERSION = 1
IMPORT_USERNAME = "kernelarena-import"
PERSON_SUFFIX = " (imported)"
FINAL = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
DATETIMES = {"created", "started", "finished", "requested", "measured", "graded"}
_SHA256 = re.compile(r"[0-9a-f]{64}")

SUITE_FIELDS = ("name", "level", "protocol", "description")
PROBLEM_FIELDS = ("name", "position", "sha256", "status", "reasons")
VALIDATION_FIELDS = ("eager_ms", "compile_ms", "flops", "bytes_moved", "sol_ms", "validated_on")
BASELINE_FIELDS = (
    "eager_ms",
    "compile_ms",
    "compile_max_autotune_ms",
    "sol_ms",
    "measurements",
    "environment",
    "error",
    "requested",
    "measured",
)
EVALUATION_FIELDS = ("agent", "gpu_type", "protocol", "max_turns", "agent_identity", "created")
RUN_FIELDS = (
    "agent",
    "kind",
    "gpu_type",
    "protocol",
    "max_turns",
    "status",
    "error",
    "best_speedup_vs_compile",
    "best_speedup_vs_eager",
    "prompt_tokens",
    "completion_tokens",
    "cost_dollars",
    "gpu_seconds",
    "created",
    "started",
    "finished",
)
CANDIDATE_FIELDS = ("seq", "sources", "verdict", "speedup_vs_compile", "verified")
GRADE_FIELDS = (
    "status",
    "reasons",
    "verdict",
    *MEASURED_FIELDS,
    "max_rel_err",
    "secret_seeds",
    "graded",
)
REPORTED_FIELDS = (
    "entrant",
    "gpu",
    "protocol",
    "citation",
    "url",
    "correct_rate",
    "fast_1_0_vs_compile",
    "fast_1_0_vs_eager",
    "geomean_speedup_vs_compile",
    "geomean_speedup_vs_eager",
    "note",
)
TOP_FIELDS = (
    "format",
    "version",
    "origin",
    "exported",
    "gpu_type",
    "protocol",
    "suite",
    "environment",
    "problems",
    "baselines",
    "evaluations",
    "submissions",
    "reported",
)


class ResultsFileError(ValueError):
    """The results cannot be exported or the file cannot be imported; the message says what to
    fix. Nothing was written."""


# ---------------------------------------------------------------------------------------------
# Export


def export_results(
    suite: Suite,
    gpu_type: str,
    protocol: str | None = None,
    *,
    with_sources: bool = False,
    origin: str = "",
) -> dict:
    """The suite's results on `gpu_type` under `protocol` (the suite's by default), as the
    file's JSON object."""
    protocol = protocol or suite.protocol
    origin = origin or socket.gethostname()
    instance = Instance.key_here()
    here = f"{origin}/{instance}"  # the keys' prefix of what was run in this database
    entries = list(suite.entries.select_related("problem").order_by("position"))
    _refuse_private(suite, entries)
    problems = [entry.problem for entry in entries]
    evaluations = Evaluation.objects.filter(suite=suite, gpu_type=gpu_type, protocol=protocol)
    submissions = _ended(Run.objects.filter(kind=RunKind.SUBMISSION, problem__in=problems))
    submissions = submissions.filter(gpu_type=gpu_type, protocol=protocol)
    baselines = Baseline.objects.filter(problem__in=problems, gpu_type=gpu_type, protocol=protocol)
    return {
        "format": FORMAT,
        "version": VERSION,
        "origin": origin,
        "instance": instance,
        "exported": timezone.now().isoformat(),
        "gpu_type": gpu_type,
        "protocol": protocol,
        "suite": {field: getattr(suite, field) for field in SUITE_FIELDS},
        "environment": _environment(baselines),
        "problems": [_problem_out(entry, with_sources) for entry in entries],
        "baselines": [_baseline_out(baseline) for baseline in baselines.order_by("problem")],
        "evaluations": [_evaluation_out(e, here) for e in evaluations.order_by("created", "id")],
        "submissions": [_run_out(run, here) for run in submissions.order_by("created", "id")],
        "reported": [_fields(r, REPORTED_FIELDS) for r in suite.reported_results.all()],
    }


def write_results_file(data: dict, path: Path | str) -> None:
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def _refuse_private(suite: Suite, entries: list[SuiteProblem]) -> None:
    # Suites hold public problems only (import_suite); a private one here is a bug or a hand
    # edit, and its source, name and results must not leave this instance.
    private = [e.name for e in entries if e.problem.visibility != Visibility.PUBLIC]
    if private:
        raise ResultsFileError(
            f"suite {suite.name} holds private problems ({', '.join(private)}): a results file "
            "is public; remove them from the suite or make them public first"
        )


def _ended(runs):
    """Final runs only: a queued or running one would never end where it is imported."""
    return runs.filter(status__in=FINAL, problem__visibility=Visibility.PUBLIC)


def _fields(obj, names: tuple[str, ...]) -> dict:
    out = {}
    for name in names:
        value = getattr(obj, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else value
    return out


def _problem_out(entry: SuiteProblem, with_sources: bool) -> dict:
    problem = entry.problem
    out = {
        "name": entry.name,
        "position": entry.position,
        "sha256": problem.sha256,
        "status": problem.status,
        "reasons": problem.reasons,
        **_fields(problem, VALIDATION_FIELDS),
    }
    # A synthesized problem is the composer's text, published with its suite: the file is the
    # only way another machine gets its source (no folder to import_suite it from).
    if (with_sources or entry.provenance) and problem.source:
        out["source"] = problem.source
    if entry.provenance:
        out["provenance"] = entry.provenance
    return out


def _baseline_out(baseline: Baseline) -> dict:
    return {"problem": baseline.problem.sha256, **_fields(baseline, BASELINE_FIELDS)}


def _evaluation_out(evaluation: Evaluation, here: str) -> dict:
    key = evaluation.imported_from or f"{here}/evaluation/{evaluation.pk}"
    runs = _ended(evaluation.runs.all()).order_by("created", "id")
    return {
        "key": key,
        **_fields(evaluation, EVALUATION_FIELDS),
        "runs": [_run_out(run, here) for run in runs],
    }


def _run_out(run: Run, here: str) -> dict:
    grade = Grade.objects.filter(run=run).exclude(status=GradeStatus.PENDING).first()
    # The best candidate and the one the re-grade judged (the same one, unless the best moved).
    candidates = {c.pk: c for c in (run.best_candidate, grade and grade.candidate) if c}
    out = {
        "key": run.imported_from or f"{here}/run/{run.pk}",
        "problem": run.problem.sha256,
        **_fields(run, RUN_FIELDS),
        "candidates": [_fields(c, CANDIDATE_FIELDS) for c in candidates.values()],
        "best_candidate": run.best_candidate.seq if run.best_candidate else None,
        "grade": None,
    }
    if run.kind == RunKind.SUBMISSION:
        # A person's name is already public on every board that shows their submission.
        out["owner"] = run.owner.username
    if grade is not None:
        out["grade"] = {"candidate": grade.candidate.seq, **_fields(grade, GRADE_FIELDS)}
    return out


def _environment(baselines) -> dict:
    measured = baselines.filter(measured__isnull=False).order_by("-measured").first()
    return {
        "gpu": measured.environment if measured else {},
        "software": {
            "kernelarena": checkout_commit(),
            "python": platform.python_version(),
            "django": django.get_version(),
        },
    }


def checkout_commit(repo: Path = settings.BASE_DIR) -> str:
    """The exporting checkout's commit, "+modified" after it when tracked files differ from it
    (a lent GPU host is sent a working tree whose commits its git may not have), or "" where
    there is no git checkout."""
    git = ["git", "-C", str(repo)]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        )
    except OSError:
        return ""
    if head.returncode != 0:
        return ""
    return head.stdout.strip() + ("+modified" if changed.stdout.strip() else "")


# ---------------------------------------------------------------------------------------------
# Import


@dataclass
class ImportSummary:
    suite: str
    gpu_type: str
    protocol: str
    origin: str
    problems: int
    problems_added: int
    baselines: int
    evaluations: int
    runs: int
    runs_added: int
    baselines_kept: int = 0  # newer here than in the file
    own: bool = False  # this database's own export: nothing imported
    baselines_waiting: int = 0  # requested in the file, not measured yet

    def line(self) -> str:
        where = f"suite {self.suite} on {self.gpu_type} ({self.protocol}) from {self.origin}"
        if self.own:
            return f"{where}: this database's own export, nothing to import"
        kept = f", {self.baselines_kept} newer here kept" if self.baselines_kept else ""
        return (
            f"{where}: {self.problems} problems ({self.problems_added} new), "
            f"{baselines_counted(self.baselines, self.baselines_waiting)}{kept}, "
            f"{self.evaluations} evaluations, {self.runs} runs ({self.runs_added} new)"
        )


def waiting_baselines(rows: list[dict]) -> int:
    """A file's baseline rows that were requested and not measured yet (no time, no error)."""
    return sum(row.get("measured") is None and not row.get("error") for row in rows)


def baselines_counted(rows: int, waiting: int) -> str:
    """The count, and how many are not measured yet: a row is stored when it is asked for, so a
    count alone reads a level as measured when it is not (level 2's file, session 48)."""
    return f"{rows} baselines" + (f" ({waiting} not measured yet)" if waiting else "")


def read_results_file(path: Path | str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsFileError(f"{path} cannot be read as JSON: {exc}") from None


def import_results(data: dict) -> ImportSummary:
    """Store the file's results; raises ResultsFileError, having written nothing, on bad input."""
    check_results(data)
    if data.get("instance") == Instance.key_here():
        counts = (len(data["problems"]), 0, len(data["baselines"]), len(data["evaluations"]), 0, 0)
        return ImportSummary(*_described(data), *counts, own=True)
    with transaction.atomic():
        suite = _suite_in(data["suite"])
        attach_reported_results(suite)
        problems, added = _problems_in(suite, data["problems"])
        kept = sum(
            not _baseline_in(baseline, problems[baseline["problem"]], data)
            for baseline in data["baselines"]
        )
        importer = system_account(IMPORT_USERNAME)
        runs = [0, 0]  # stored, new
        for evaluation in data["evaluations"]:
            stored = _evaluation_in(evaluation, suite, importer)
            for run in evaluation["runs"]:
                runs[1] += _run_in(run, problems, importer, stored)
            runs[0] += len(evaluation["runs"])
        for run in data["submissions"]:
            person = system_account(_person_name(run["owner"]))
            runs[1] += _run_in(run, problems, person, None)
        runs[0] += len(data["submissions"])
        for reported in data["reported"]:
            _reported_in(reported, suite)
    counts = (len(problems), added, len(data["baselines"]), len(data["evaluations"]), *runs)
    waiting = waiting_baselines(data["baselines"])
    return ImportSummary(*_described(data), *counts, baselines_kept=kept, baselines_waiting=waiting)


def _described(data: dict) -> tuple[str, str, str, str]:
    return data["suite"]["name"], data["gpu_type"], data["protocol"], data["origin"]


def import_results_folder(folder: Path | str) -> list[str]:
    """Import every *.json export in `folder` (what `make run` does at start); one line each.
    A file that cannot be imported is named with the reason and the others still go in."""
    lines = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            lines.append(f"{path.name}: {import_results(read_results_file(path)).line()}")
        except ResultsFileError as exc:
            lines.append(f"{path.name}: not imported: {exc}")
    return lines


def system_account(username: str):
    """An account nobody logs in to, created on first use."""
    user, created = get_user_model().objects.get_or_create(
        username=username, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def _person_name(username: str) -> str:
    # A space is refused by the sign-up form, so nobody can sign up as an imported person.
    return username if username.endswith(PERSON_SUFFIX) else username + PERSON_SUFFIX


def _suite_in(fields: dict) -> Suite:
    suite = Suite.objects.filter(name=fields["name"]).first()
    if suite is None:
        return Suite.objects.create(**{field: fields[field] for field in SUITE_FIELDS})
    if suite.protocol != fields["protocol"]:
        raise ResultsFileError(
            f"suite {suite.name} exists here with protocol {suite.protocol}, the file's has "
            f"{fields['protocol']}: import it into an instance without that suite, or rename "
            "the suite in the file"
        )
    return suite


def _problems_in(suite: Suite, entries: list[dict]) -> tuple[dict[str, Problem], int]:
    """The file's problems by sha256, stored and in the suite; and how many were new here."""
    owner = service_account()
    problems, added = {}, 0
    for entry in entries:
        problem = Problem.objects.filter(owner=owner, sha256=entry["sha256"]).first()
        added += problem is None
        problems[entry["sha256"]] = _problem_in(problem, entry, suite, owner)
        _entry_in(suite, problems[entry["sha256"]], entry)
    return problems, added


def _problem_in(problem: Problem | None, entry: dict, suite: Suite, owner) -> Problem:
    if problem is None:
        problem = Problem(owner=owner, title=f"{suite.name}/{entry['name']}", source="")
        problem.sha256 = entry["sha256"]  # kept by save() while the source is empty
        problem.visibility = Visibility.PUBLIC
    unvalidated = problem.status in (ProblemStatus.PENDING, ProblemStatus.VALIDATING)
    # The file's validation stands where nothing here validated the problem.
    if not problem.source or unvalidated:
        problem.status, problem.reasons = entry["status"], entry["reasons"]
        for field in VALIDATION_FIELDS:
            setattr(problem, field, entry.get(field))
    problem.source = problem.source or entry.get("source", "")
    problem.save()
    return problem


def _entry_in(suite: Suite, problem: Problem, entry: dict) -> None:
    existing = SuiteProblem.objects.filter(suite=suite, name=entry["name"]).first()
    provenance = entry.get("provenance") or {}
    if existing is None:
        existing = SuiteProblem.objects.filter(suite=suite, problem=problem).first()
        if existing is None:
            SuiteProblem.objects.create(
                suite=suite,
                problem=problem,
                name=entry["name"],
                position=entry["position"],
                provenance=provenance,
            )
            return
    if existing.problem_id != problem.pk or existing.name != entry["name"]:
        raise ResultsFileError(
            f"problems: {entry['name']} (sha256 {entry['sha256'][:12]}) does not match suite "
            f"{suite.name} here, which has {existing.name} with sha256 "
            f"{existing.problem.sha256[:12]}: export and import the changed problem under a new "
            "suite"
        )
    if provenance and not existing.provenance:  # a synthesized suite's, imported without it
        SuiteProblem.objects.filter(pk=existing.pk).update(provenance=provenance)


def _baseline_in(fields: dict, problem: Problem, data: dict) -> bool:
    """Stores the file's baseline, unless the row here is newer (measured or requested after the
    file's: a file exported before a machine measured again must not undo it); True if stored."""
    values = {field: _value(field, fields[field]) for field in BASELINE_FIELDS}
    values["environment"] = {**values["environment"], "imported_from": data["origin"]}
    key = {"problem": problem, "gpu_type": data["gpu_type"], "protocol": data["protocol"]}
    here = Baseline.objects.filter(**key).first()
    if here is None:
        Baseline.objects.create(**key, **values)
    elif _as_of(here.requested, here.measured) > _as_of(values["requested"], values["measured"]):
        return False
    else:
        Baseline.objects.filter(pk=here.pk).update(**values)
    return True


def _as_of(*times: datetime | None) -> datetime:
    """The latest of a row's times; a row with none is older than any."""
    return max((t for t in times if t is not None), default=datetime.min.replace(tzinfo=UTC))


def _evaluation_in(fields: dict, suite: Suite, owner) -> Evaluation:
    values = {field: fields[field] for field in EVALUATION_FIELDS if field != "created"}
    evaluation, _ = Evaluation.objects.update_or_create(
        imported_from=fields["key"], defaults={**values, "suite": suite, "owner": owner}
    )
    # The board's entrant is an agent's latest evaluation: keep when it was really run.
    Evaluation.objects.filter(pk=evaluation.pk).update(created=_value("created", fields["created"]))
    return evaluation


def _run_in(fields: dict, problems: dict, owner, evaluation: Evaluation | None) -> bool:
    """Store one run with its candidates and grade; True when it is new here."""
    values = {field: _value(field, fields[field]) for field in RUN_FIELDS}
    created_at = values.pop("created")
    run, added = Run.objects.update_or_create(
        imported_from=fields["key"],
        defaults={
            **values,
            "problem": problems[fields["problem"]],
            "owner": owner,
            "evaluation": evaluation,
            "best_candidate": None,
        },
    )
    candidates = {c["seq"]: _candidate_in(run, c) for c in fields["candidates"]}
    Run.objects.filter(pk=run.pk).update(
        created=created_at, best_candidate=candidates.get(fields["best_candidate"])
    )
    grade = fields["grade"]
    if grade is None:
        Grade.objects.filter(run=run).delete()
    else:
        values = {field: _value(field, grade[field]) for field in GRADE_FIELDS}
        Grade.objects.update_or_create(
            run=run, defaults={**values, "candidate": candidates[grade["candidate"]]}
        )
    return added


def _candidate_in(run: Run, fields: dict) -> Candidate:
    values = {field: fields[field] for field in CANDIDATE_FIELDS if field != "seq"}
    candidate, _ = Candidate.objects.update_or_create(run=run, seq=fields["seq"], defaults=values)
    return candidate


def _reported_in(fields: dict, suite: Suite) -> None:
    values = {field: fields[field] for field in REPORTED_FIELDS}
    ReportedResult.objects.update_or_create(
        suite=suite, entrant=values.pop("entrant"), citation=values.pop("citation"), defaults=values
    )


def _value(field: str, value):
    if field in DATETIMES and value is not None:
        return parse_datetime(value)
    return value


# ---------------------------------------------------------------------------------------------
# Checking a file before anything is written


def check_results(data) -> None:
    """Raise ResultsFileError naming the first thing wrong with the file, if anything is."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ResultsFileError(f"not a results file: its 'format' must be {FORMAT!r}")
    if data.get("version") != VERSION:
        raise ResultsFileError(
            f"format version {data.get('version')!r} is not one this instance reads "
            f"({VERSION}): export the results again with this version of KernelArena"
        )
    _require(data, TOP_FIELDS, "the file")
    _require(data["suite"], SUITE_FIELDS, "suite")
    if data["protocol"] not in settings.PROTOCOLS:
        known = ", ".join(settings.PROTOCOLS)
        raise ResultsFileError(f"protocol: {data['protocol']!r} is not one of {known}")
    for index, entry in enumerate(data["problems"]):
        _check_problem(entry, f"problems[{index}]")
    known = {entry["sha256"] for entry in data["problems"]}
    for index, baseline in enumerate(data["baselines"]):
        _require(baseline, ("problem", *BASELINE_FIELDS), f"baselines[{index}]")
        _check_known(baseline["problem"], known, f"baselines[{index}]")
    for index, evaluation in enumerate(data["evaluations"]):
        where = f"evaluations[{index}]"
        _require(evaluation, ("key", "runs", *EVALUATION_FIELDS), where)
        for n, run in enumerate(evaluation["runs"]):
            _check_run(run, known, f"{where}.runs[{n}]")
    for index, run in enumerate(data["submissions"]):
        _require(run, ("owner",), f"submissions[{index}]")
        _check_run(run, known, f"submissions[{index}]")
    for index, reported in enumerate(data["reported"]):
        _require(reported, REPORTED_FIELDS, f"reported[{index}]")


def _require(item, fields: tuple[str, ...], where: str) -> None:
    if not isinstance(item, dict):
        raise ResultsFileError(f"{where}: must be an object")
    missing = [field for field in fields if field not in item]
    if missing:
        raise ResultsFileError(f"{where}: missing {', '.join(missing)}")


def _check_problem(entry: dict, where: str) -> None:
    _require(entry, PROBLEM_FIELDS, where)
    where = f"{where} ({entry['name']})"
    if not _SHA256.fullmatch(str(entry["sha256"])):
        raise ResultsFileError(f"{where}: sha256 must be 64 lowercase hex digits")
    if entry["status"] not in ProblemStatus.values:
        raise ResultsFileError(f"{where}: status {entry['status']!r} is not a problem status")
    if not isinstance(entry.get("provenance", {}), dict):
        raise ResultsFileError(f"{where}: provenance must be an object (a synthesized problem's)")
    source = entry.get("source")
    if not source:
        return
    try:
        check_source(source)
    except ProblemError as exc:
        raise ResultsFileError(f"{where}: its source fails the checks: {exc}") from None
    if source_sha256(source) != entry["sha256"]:
        raise ResultsFileError(
            f"{where}: its source's sha256 is {source_sha256(source)}, not the file's "
            f"{entry['sha256']}: the file was edited or damaged; export it again"
        )


def _check_run(run: dict, known: set[str], where: str) -> None:
    _require(run, ("key", "problem", "candidates", "best_candidate", "grade", *RUN_FIELDS), where)
    _check_known(run["problem"], known, where)
    if run["status"] not in FINAL:
        raise ResultsFileError(f"{where}: status {run['status']!r} is not final; export again")
    seqs = set()
    for n, candidate in enumerate(run["candidates"]):
        _require(candidate, CANDIDATE_FIELDS, f"{where}.candidates[{n}]")
        seqs.add(candidate["seq"])
    for name, seq in (("best_candidate", run["best_candidate"]), ("grade", _graded(run))):
        if seq is not None and seq not in seqs:
            raise ResultsFileError(f"{where}.{name}: candidate {seq} is not in its candidates")
    if run["grade"] is not None:
        _require(run["grade"], ("candidate", *GRADE_FIELDS), f"{where}.grade")
        # A pending grade would wait for a re-grade that no worker here will ever do.
        if run["grade"]["status"] not in (GradeStatus.RANKED, GradeStatus.UNDER_REVIEW):
            raise ResultsFileError(f"{where}.grade: status must be ranked or under_review")


def _graded(run: dict):
    return run["grade"].get("candidate") if isinstance(run["grade"], dict) else None


def _check_known(sha256: str, known: set[str], where: str) -> None:
    if sha256 not in known:
        raise ResultsFileError(f"{where}: problem {sha256!r} is not among the file's problems")
