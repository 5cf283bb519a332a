"""Importing a folder of KernelBench-format problems as a public suite.

Each `*.py` file is one problem, named after the file's stem and ordered by KernelBench's leading
index ("19_ReLU.py" comes before "100_HingeLoss.py"); the suite's level comes from the path
("…/level1"). Sources that fail the static checks are not stored and come back with the reason;
the rest are stored as public problems of the service account and validated by a worker, as an
upload is. Importing again adds what is new and keeps everything already there. A problem that
came from a results file without its source (matched by sha256) gets its source here instead of a
twin. A KernelBench suite gets the papers' reported rows (suites.reported).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from gpu_workers.harness.problem_source import ProblemError, check_source, source_sha256
from webapp.accounts.service_account import service_account
from webapp.problems.models import Problem, Visibility
from webapp.problems.upload import upload_problem
from webapp.problems.validation import UNFINISHED, enqueue_validation
from webapp.suites.models import Suite, SuiteProblem
from webapp.suites.reported import attach_reported_results

_LEVEL = re.compile(r"level[_-]?(\d+)", re.IGNORECASE)
_INDEX = re.compile(r"^(\d+)")


class SuiteImportError(ValueError):
    """The folder or the options cannot be imported; the message says what to fix."""


@dataclass
class ImportedFile:
    name: str
    problem: Problem | None  # None when the source was rejected before it was stored
    added: bool  # new to the suite in this import
    error: str = ""


def level_of(path: Path) -> int | None:
    """KernelBench's level from the folder's path: "KernelBench/level2" -> 2."""
    for part in reversed(path.resolve().parts):
        if match := _LEVEL.fullmatch(part) or _LEVEL.search(part):
            return int(match.group(1))
    return None


def problem_files(folder: Path) -> list[Path]:
    def order(path: Path) -> tuple:
        index = _INDEX.match(path.stem)
        return (0, int(index.group(1)), path.stem) if index else (1, 0, path.stem)

    return sorted((p for p in folder.glob("*.py") if not p.name.startswith("_")), key=order)


def import_suite(
    folder: Path | str, name: str, protocol: str | None = None, description: str = ""
) -> tuple[Suite, list[ImportedFile]]:
    folder = Path(folder)
    if not folder.is_dir():
        raise SuiteImportError(f"{folder} is not a folder: give the folder of problem files")
    files = problem_files(folder)
    if not files:
        raise SuiteImportError(f"{folder} has no .py problem files")
    suite = _suite(folder, name, protocol, description)
    attach_reported_results(suite)
    owner = service_account()
    position = suite.entries.count()
    imported = []
    for path in files:
        item = _import_file(suite, owner, path, position)
        position += item.added
        imported.append(item)
    return suite, imported


def _suite(folder: Path, name: str, protocol: str | None, description: str) -> Suite:
    existing = Suite.objects.filter(name=name).first()
    if existing is not None:
        if protocol and protocol != existing.protocol:
            raise SuiteImportError(
                f"suite {name!r} exists with protocol {existing.protocol!r}: import under another "
                "name to judge these problems under another protocol"
            )
        return existing
    protocol = protocol or settings.PROTOCOLS[0]
    if protocol not in settings.PROTOCOLS:
        known = ", ".join(settings.PROTOCOLS)
        raise SuiteImportError(f"unknown protocol {protocol!r}: use one of {known}")
    return Suite.objects.create(
        name=name,
        level=level_of(folder),
        protocol=protocol,
        source_path=str(folder),
        description=description,
    )


def _import_file(suite: Suite, owner, path: Path, position: int) -> ImportedFile:
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return ImportedFile(path.stem, None, False, f"cannot be read as text: {exc}")
    try:
        with transaction.atomic():
            title = f"{suite.name}/{path.stem}"
            problem = (
                _attach_source(owner, source)
                # The operator's import: not bounded by a person's share of the validations.
                or upload_problem(owner, title, source, Visibility.PUBLIC, bounded=False)[0]
            )
            twin = suite.entries.filter(problem=problem).exclude(name=path.stem).first()
            if twin is not None:
                return ImportedFile(path.stem, None, False, f"the same source as {twin.name}")
            entry, added = SuiteProblem.objects.get_or_create(
                suite=suite, name=path.stem, defaults={"problem": problem, "position": position}
            )
    except ProblemError as exc:
        return ImportedFile(path.stem, None, False, str(exc))
    if entry.problem_id != problem.pk:  # nothing stored is replaced: results refer to the old one
        return ImportedFile(
            path.stem,
            None,
            False,
            "the suite already has a problem of this name with another "
            "source: import the changed file under a new name or into a new suite",
        )
    return ImportedFile(path.stem, problem, added)


def _attach_source(owner, source: str) -> Problem | None:
    """The problem a results file stored by sha256 alone, now given this source; None when there
    is none. Its validation and results came with the file, so it is not validated again; one
    the file had not finished validating (a suite exported mid-way, to go on elsewhere) is sent
    now, since no worker could take it without its source."""
    check_source(source)
    waiting = Problem.objects.filter(owner=owner, sha256=source_sha256(source), source="").first()
    if waiting is not None:
        waiting.source = source
        waiting.save(update_fields=["source", "sha256", "updated"])
        if waiting.status in UNFINISHED:
            enqueue_validation(waiting)
    return waiting
