"""python manage.py synthesize, as an operator runs it on the cpu target: composed candidates
that copy a reference or each other are turned away with the problem they copy, the rest are
validated by the worker's real validation (run in this process, as in test_suite_commands.py),
and a second run adds only what is missing."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from gpu_workers import problem_validation
from gpu_workers.harness.synthesis.composer import COMPOSER, CPU, compose
from gpu_workers.harness.synthesis.operators import available
from webapp import dispatch
from webapp.accounts.service_account import service_account
from webapp.problems.models import Problem, ProblemStatus, Visibility
from webapp.suites import synthesis
from webapp.suites.models import Suite, SuiteProblem

# KernelBench's level 1 sigmoid, as its files are written.
SIGMOID = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a Sigmoid activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)

batch_size = 16
dim = 16384

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
'''
ONE_OP = ("--max-ops", "1", "--torch-only", "--device", "cpu")


def command(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def reference(tmp_path):
    folder = tmp_path / "KernelBench" / "level1"
    folder.mkdir(parents=True)
    (folder / "21_Sigmoid.py").write_text(SIGMOID)
    return folder.parent


@pytest.mark.django_db(transaction=True)
def test_it_synthesizes_valid_problems_apart_from_the_reference(reference, monkeypatch):
    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", problem_validation.validate)
    # seed 1, one operator: sigmoid, sigmoid, sum, ... (the first two copy the reference)
    args = ("synthesize", "--count", "1", "--seed", "1", "--into", "synth", *ONE_OP)
    out = command(*args, "--reference", str(reference))

    assert "rejected 0000_sigmoid: similar: the same operators (sigmoid) as reference " in out
    assert "level1/21_Sigmoid.py" in out and "rejected 0001_sigmoid: similar:" in out
    assert "validation: 1 of 1 done" in out  # progress, as import_suite prints it
    assert "1 of 1 in synth from seed 1: 1 added, 2 candidates turned away" in out
    (entry,) = Suite.objects.get(name="synth").entries.select_related("problem")
    assert entry.name == "0002_sum" and entry.problem.status == ProblemStatus.VALID
    assert entry.problem.visibility == Visibility.PUBLIC
    assert entry.problem.source == compose(1, 2, 1, CPU, available(False)).source
    provenance = entry.provenance
    assert provenance["composer"] == COMPOSER == "chain-v2" and provenance["ops"] == ["sum"]
    assert (provenance["seed"], provenance["index"]) == (1, 2)
    filters = provenance["filters"]
    assert filters["similarity"]["passed"] and filters["similarity"]["reference"] == str(reference)
    assert filters["validation"]["eager_ms"] == entry.problem.eager_ms > 0
    assert filters["eager_time"]["window_ms"] == [CPU.min_ms / 4, CPU.max_ms * 10]

    stored = Problem.objects.count()
    again = command(*args, "--reference", str(reference))  # nothing is validated again
    assert "1 of 1 in synth from seed 1: 0 added" in again
    assert (
        Problem.objects.count() == stored and Suite.objects.get(name="synth").entries.count() == 1
    )


@pytest.mark.django_db(transaction=True)
def test_rejections_by_the_worker_and_by_eager_time_keep_their_reasons(monkeypatch):
    sent = []

    def validate_in_process(pk):  # the worker's verdict on the one never validated
        sent.append(pk)
        Problem.objects.filter(pk=pk).update(status=ProblemStatus.VALID, eager_ms=2.0)

    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", validate_in_process)
    owner = service_account()
    # What earlier runs left of seed 2's first candidates (gelu, sdpa, layer_norm, logsumexp).
    verdicts = [
        {"status": ProblemStatus.REJECTED, "reasons": ["output is constant"]},
        {"status": ProblemStatus.VALID, "eager_ms": 5000.0, "validated_on": "cpu"},
        {"status": ProblemStatus.VALID, "eager_ms": 1.0, "validated_on": "cpu"},
        {"status": ProblemStatus.PENDING},  # stored while no broker ran: never sent
    ]
    for index, verdict in enumerate(verdicts):
        candidate = compose(2, index, 1, CPU, available(False))
        Problem.objects.create(
            owner=owner, title=candidate.name, source=candidate.source, **verdict
        )

    out = command("synthesize", "--count", "2", "--seed", "2", "--into", "s2", *ONE_OP)

    assert "rejected 0000_gelu: validation: output is constant" in out
    assert "rejected 0001_sdpa: eager time: 5000.0 ms on cpu, outside 0.05..200.0 ms" in out
    assert "added 0002_layer_norm" in out and "added 0003_logsumexp" in out
    names = [e.name for e in Suite.objects.get(name="s2").entries.all()]
    assert names == ["0002_layer_norm", "0003_logsumexp"]
    assert sent == [Problem.objects.get(title="0003_logsumexp").pk]  # only the unsent one

    with pytest.raises(CommandError, match="--count is at least 1"):
        command("synthesize", "--count", "0", "--seed", "2", "--into", "s2")
    with pytest.raises(CommandError, match="--max-ops is 1 to 5"):
        command("synthesize", "--count", "1", "--seed", "2", "--into", "s2", "--max-ops", "6")
    with pytest.raises(CommandError, match="is not a folder"):
        command("synthesize", "--count", "1", "--seed", "2", "--into", "s2", "--reference", "/nope")


@pytest.mark.django_db(transaction=True)
def test_a_round_larger_than_a_persons_upload_limit_is_sent_whole(monkeypatch, settings):
    """The service account's candidates are its own work, like a suite import: a round of five
    goes to the workers at once although a person may have only one validation waiting."""
    from webapp.problems.upload import ValidationsLimited, upload_problem

    settings.PENDING_VALIDATIONS_PER_USER = 1
    sent = []
    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", sent.append)  # a worker, later

    def validate_all():  # the worker's verdicts, once the whole round is out
        Problem.objects.filter(pk__in=sent).update(
            status=ProblemStatus.VALID, eager_ms=2.0, validated_on="cpu"
        )

    monkeypatch.setattr(
        "webapp.suites.management.commands.synthesize.wait_for", lambda *a, **k: validate_all()
    )
    out = command("synthesize", "--count", "5", "--seed", "3", "--into", "s3", *ONE_OP)
    assert len(sent) >= 5 and "5 of 5 in s3 from seed 3" in out, out
    # known-bad: the same uploads as a person stop at the limit
    with pytest.raises(ValidationsLimited):
        for index in range(2):
            upload_problem(
                service_account(), "x", compose(4, index, 1, CPU, available(False)).source
            )


@pytest.mark.django_db
def test_a_suite_goes_on_with_the_composer_it_was_made_with():
    """synth-1 was made with chain-v1: going on with it composes chain-v1's candidates, so the
    same seed's problems are the ones it began with; asking for another composer there is an
    error that says to make a new suite (known-bad: chain-v2's sizes would be new problems)."""
    suite = Suite.objects.create(name="old")
    made = compose(1, 0, 1, CPU, available(False), composer="chain-v1")
    problem = Problem.objects.create(owner=service_account(), title="p", source=made.source)
    SuiteProblem.objects.create(
        suite=suite, problem=problem, name=made.name, position=0, provenance=made.provenance()
    )
    settings = synthesis.Settings(seed=1, count=2, max_ops=1, with_transformers=False)

    run = synthesis.start("old", settings)
    assert run.composer == "chain-v1"
    assert synthesis.offer(run, 0).entry is not None  # its first candidate, already in the suite
    assert synthesis.start("new", settings).composer == COMPOSER
    asked = synthesis.Settings(seed=1, count=2, composer="chain-v2")
    with pytest.raises(synthesis.SynthesisError, match="was made with chain-v1"):
        synthesis.start("old", asked)
    with pytest.raises(synthesis.SynthesisError, match="unknown composer"):
        synthesis.start("new", synthesis.Settings(seed=1, count=2, composer="chain-v9"))
