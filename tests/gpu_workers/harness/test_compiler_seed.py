"""The machine's compiler seed (judge/compiler_seed.py): built once by a trusted step, lent to a
reference runner as a private copy before its first torch.compile."""

from __future__ import annotations

import os

from gpu_workers.harness.judge import compiler_seed, validation
from gpu_workers.harness.judge.protocol import LOOSE

# A problem that refuses to load unless its runner's Inductor cache already holds compiled
# objects when the problem is imported: only a lent seed puts them there.
NEEDS_A_SEEDED_CACHE = """import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
        objects = [f for _, _, files in os.walk(cache) for f in files if f.endswith(".so")]
        if not cache or not objects:
            raise RuntimeError("this runner's Inductor cache starts empty")

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
"""


def test_a_reference_runner_starts_its_compile_cache_from_the_seed():
    seed = compiler_seed.ensure("cpu")
    assert seed is not None and list((seed / "inductor").rglob("*.so"))
    assert compiler_seed.ensure("cpu") == seed  # built once per machine, then found

    report = validation.validate(NEEDS_A_SEEDED_CACHE, "cpu", LOOSE)

    assert report.ok, report.reasons
    assert report.compile_ms and report.compile_ms > 0  # its own torch.compile ran from the copy


def test_without_a_seed_the_runner_compiles_from_nothing(tmp_path, monkeypatch):
    """Known-bad for the problem above, and the fallback: a machine whose seed failed to build
    records why once and lends none; validation still runs."""
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path / "cache"))
    path = compiler_seed.seed_path("cpu")
    path.parent.mkdir(parents=True)
    path.with_name(f"{path.name}.failed").write_text("compiler_seed: the compiler is missing")

    assert compiler_seed.ensure("cpu") is None and compiler_seed.ready("cpu") is None
    report = validation.validate(NEEDS_A_SEEDED_CACHE, "cpu", LOOSE)

    assert not report.ok
    assert any("starts empty" in reason for reason in report.reasons), report.reasons


def test_the_copy_is_the_runners_own(tmp_path, monkeypatch):
    """What a runner writes lands in its private copy, never in the seed others copy from."""
    seed = compiler_seed.ensure("cpu")
    before = sorted(p.relative_to(seed) for p in seed.rglob("*"))
    for variable in compiler_seed.CACHES.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))

    compiler_seed.lend(seed)

    private = tmp_path.glob("compile-cache-*/inductor")
    (inductor,) = private
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(inductor)
    (inductor / "written-by-a-problem").write_text("x")
    assert sorted(p.relative_to(seed) for p in seed.rglob("*")) == before
