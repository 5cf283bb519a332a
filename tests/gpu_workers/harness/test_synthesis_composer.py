"""The composer: the same seed gives the same sources, and every chain's shapes fit together.
Sources are only compiled here (syntax); running them is the sandbox's work
(tests/gpu_workers/test_synthesize_command.py)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from gpu_workers.harness.problem_source import source_sha256
from gpu_workers.harness.synthesis import operators
from gpu_workers.harness.synthesis.composer import CPU, CUDA, compose

ALL = operators.available(with_transformers=True)
TORCH_ONLY = operators.available(with_transformers=False)
# constructor -> which dimension of its input its first argument must equal
INPUT_DIM = {
    "nn.Linear": -1,
    "nn.LayerNorm": -1,
    "nn.RMSNorm": -1,
    "nn.MultiheadAttention": -1,
    "nn.Conv2d": 1,
    "nn.BatchNorm1d": 1,
    "nn.BatchNorm2d": 1,
    "LlamaRMSNorm": -1,
}
_SHAPE = re.compile(r"# \(([\d, ]+)\)$")
_MODULE = re.compile(r"self\.(op\d+) = ([\w.]+)\((\d+)")


def test_it_gives_the_same_sources_for_the_same_seed():
    for index in range(40):
        first = compose(7, index, operators=ALL)
        assert first == compose(7, index, operators=ALL)
        assert first.provenance()["index"] == index and first.provenance()["seed"] == 7
    assert [compose(7, i).source for i in range(10)] != [compose(8, i).source for i in range(10)]


def test_a_candidate_does_not_depend_on_the_others():
    assert compose(3, 17, operators=ALL).source == compose(3, 17, operators=ALL).source
    later = [compose(3, i, operators=ALL) for i in range(17, 20)]
    assert later[0] == compose(3, 17, operators=ALL)


def test_every_chain_compiles_and_its_shapes_fit():
    for index in range(300):
        candidate = compose(1, index, operators=ALL if index % 2 else TORCH_ONLY)
        compile(candidate.source, candidate.name, "exec")
        assert 1 <= len(candidate.ops) <= 5
        assert len(candidate.shapes) == len(candidate.ops)
        _check_shapes(candidate)
        terminal = [operators.BY_NAME[name].terminal for name in candidate.ops]
        assert not any(terminal[:-1]), candidate.ops  # a reduction only ends a chain


def _check_shapes(candidate) -> None:
    """Each module's input size is the size its input has: the shape written after the previous
    step (or the input's), read from the rendered source."""
    lines = candidate.source.splitlines()
    modules = {m.group(1): (m.group(2), int(m.group(3))) for m in map(_MODULE.search, lines) if m}
    forward = [line for line in lines if line.startswith("        x = ")]
    shape = list(candidate.input_shape)
    for position, line in enumerate(forward):
        attr = f"op{position}"
        if attr in modules and modules[attr][0] in INPUT_DIM:
            ctor, size = modules[attr]
            assert shape[INPUT_DIM[ctor]] == size, (candidate.name, line, shape)
        shape = [int(d) for d in _SHAPE.search(line).group(1).split(",")]
        assert list(candidate.shapes[position]) == shape


def test_shapes_are_chosen_for_the_budget():
    estimates = [compose(2, i, operators=TORCH_ONLY).estimated_ms for i in range(200)]
    inside = [CPU.min_ms <= e <= CPU.max_ms for e in estimates]
    assert sum(inside) >= 0.9 * len(inside)


def test_transformers_blocks_come_only_when_asked():
    assert not any(op.needs for op in TORCH_ONLY)
    blocks = {op.name for op in ALL if op.needs}
    assert {"llama_mlp", "gpt2_mlp", "bert_intermediate", "t5_layer_ff"} <= blocks
    used = {name for i in range(300) for name in compose(5, i, operators=ALL).ops}
    assert used & blocks
    source = next(
        c.source for i in range(300) if "llama_mlp" in (c := compose(5, i, operators=ALL)).ops
    )
    tree = ast.parse(source)
    assert any(
        isinstance(n, ast.ImportFrom) and n.module.startswith("transformers.") for n in tree.body
    )


SYNTH_1 = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "synth-1-h100.json"


def test_chain_v1_still_makes_synth_1_byte_for_byte():
    """synth-1 (seed 1, the cuda budget, 39 seed operators with transformers) was made on a lent
    H100 with chain-v1: every one of its 100 problems is still that composer's candidate."""
    pytest.importorskip("transformers")
    problems = json.loads(SYNTH_1.read_text())["problems"]
    for problem in problems:
        index = problem["provenance"]["index"]
        made = compose(1, index, budget=CUDA, operators=ALL, composer="chain-v1")
        assert (made.name, source_sha256(made.source)) == (problem["name"], problem["sha256"])


@pytest.mark.parametrize("budget", [CPU, CUDA], ids=["cpu", "cuda"])
def test_chain_v2_aims_every_chain_at_the_middle_of_the_window(budget):
    """Known-bad beside it: chain-v1 left most cuda chains where they were drawn (only those
    estimated outside the window moved, the batch at most 1024): on the H100 its seed 1's
    median eager time was 0.11 ms against a middle of 0.5 ms."""
    middle = (budget.min_ms * budget.max_ms) ** 0.5

    def near(composer: str) -> float:
        made = [compose(2, i, budget=budget, operators=ALL, composer=composer) for i in range(150)]
        return sum(middle / 2 <= c.estimated_ms <= 2 * middle for c in made) / len(made)

    assert near("chain-v2") >= 0.9
    if budget is CUDA:
        assert near("chain-v1") < 0.5
    for index in range(150):
        made = compose(2, index, budget=budget, operators=ALL, composer="chain-v2")
        largest = max(_numel(s) for s in (made.input_shape, *made.shapes)) * 4
        assert largest <= budget.max_tensor_mb * 2**20, made.name
        if made.estimated_ms > budget.max_ms:  # as small as it goes
            assert made.input_shape[0] == 1, made
            assert made.layout != "sequence" or made.input_shape[1] == 16, made
        if made.estimated_ms < budget.min_ms:  # as large as memory allows
            assert 2 * largest > budget.max_tensor_mb * 2**20, made


def test_the_composers_size_the_same_chains():
    for index in range(60):
        old = compose(4, index, budget=CUDA, operators=ALL, composer="chain-v1")
        new = compose(4, index, budget=CUDA, operators=ALL, composer="chain-v2")
        assert (old.ops, old.layout) == (new.ops, new.layout)
        assert new.provenance()["composer"] == "chain-v2"
    with pytest.raises(ValueError, match="unknown composer 'chain-v0'"):
        compose(4, 0, composer="chain-v0")


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
