"""The composer: the same seed gives the same sources, and every chain's shapes fit together.
Sources are only compiled here (syntax); running them is the sandbox's work
(tests/gpu_workers/test_synthesize_command.py)."""

from __future__ import annotations

import ast
import re

from gpu_workers.harness.synthesis import operators
from gpu_workers.harness.synthesis.composer import CPU, compose

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
