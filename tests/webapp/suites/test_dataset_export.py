"""python manage.py export_dataset: a suite's problems as JSON Lines that datasets.load_dataset
reads, with each problem's source, sha256, validation and provenance."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from gpu_workers.harness.synthesis.composer import compose
from webapp.problems.models import Problem, ProblemStatus
from webapp.suites.models import Suite, SuiteProblem

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite(alice):
    suite = Suite.objects.create(name="synth")
    for position in range(3):
        candidate = compose(1, position)
        problem = Problem.objects.create(
            owner=alice,
            title=candidate.name,
            source=candidate.source,
            status=ProblemStatus.VALID,
            eager_ms=1.5 + position,
            validated_on="cpu",
        )
        SuiteProblem.objects.create(
            suite=suite,
            problem=problem,
            name=candidate.name,
            position=position,
            provenance=candidate.provenance() if position else {},  # one imported file
        )
    return suite


def test_it_writes_records_that_datasets_loads(suite, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = io.StringIO()
    call_command("export_dataset", "--suite", "synth", "--output", str(tmp_path), stdout=out)
    path = tmp_path / "problems.jsonl"
    assert f"wrote 3 problems of synth to {path}" in out.getvalue()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["name"] for row in lines] == [e.name for e in suite.entries.all()]

    # the two lines of docs/synthesis.md
    rows = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=tmp_path)
    assert rows.num_rows == 3
    first, second = rows[0], rows[1]
    assert first["source"] == suite.entries.get(position=0).problem.source
    assert first["sha256"] == suite.entries.get(position=0).problem.sha256
    assert second["validation"]["status"] == "valid" and second["validation"]["eager_ms"] == 2.5
    assert second["provenance"]["ops"] == list(compose(1, 1).ops)
    assert second["provenance"]["seed"] == 1 and second["format"] == "kernelarena-problems/1"


def test_an_unknown_suite_is_refused(tmp_path):
    with pytest.raises(CommandError, match="no suite named 'nope'"):
        call_command("export_dataset", "--suite", "nope", "--output", str(tmp_path))
