"""Signatures keep a synthesized set apart from a reference suite: an exact copy, a renamed copy
and the same operators at other sizes are caught (the known-bad ones); another chain is not."""

from __future__ import annotations

from gpu_workers.harness.synthesis.composer import compose
from gpu_workers.harness.synthesis.signature import (
    SignatureIndex,
    op_sequence,
    op_signature,
    source_signature,
)

# KernelBench's layout: module-level sizes, a submodule, torch calls.
REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Gemm, then GELU, then a row sum."""
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = torch.nn.functional.gelu(x)
        return torch.sum(x, dim=1)

batch_size = 128
in_features = 1024
out_features = 512

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''

# The same file renamed: other names, comments, spacing, an import alias, no docstring.
RENAMED = """import torch
import torch.nn as tnn  # an alias

class Model(tnn.Module):
    def __init__(self, a, b):
        super(Model, self).__init__()
        self.fc = tnn.Linear(a, b)   # renamed

    def forward(self, inp):
        inp = self.fc(inp)
        inp = torch.nn.functional.gelu(inp)
        return torch.sum(inp, dim=1)

n = 128
a = 1024
b = 512

def get_inputs():
    return [torch.randn(n, a)]

def get_init_inputs():
    return [a, b]
"""

# The same operators, written as the composer writes them, at other sizes.
SAME_OPS = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(256, 2048)

    def forward(self, x):
        x = self.op0(x)
        x = F.gelu(x)
        x = x.sum(dim=-1)
        return x


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""


def test_an_exact_or_renamed_copy_has_the_same_source_signature():
    assert source_signature(RENAMED) == source_signature(REFERENCE)
    assert source_signature(REFERENCE + "\n# a comment\n") == source_signature(REFERENCE)
    assert source_signature(SAME_OPS) != source_signature(REFERENCE)


def test_the_same_operators_have_the_same_op_signature():
    assert op_sequence(REFERENCE) == ("linear", "gelu", "sum")
    assert op_signature(SAME_OPS) == op_signature(REFERENCE) == op_signature(RENAMED)
    assert op_sequence(REFERENCE.replace("gelu", "relu")) == ("linear", "relu", "sum")


def test_the_index_names_what_a_source_copies(tmp_path):
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "7_Gemm_GELU_Sum.py").write_text(REFERENCE)
    (tmp_path / "level2" / "8_Broken.py").write_text("def (:\n")
    index = SignatureIndex()
    assert index.add_folder(tmp_path) == 1
    assert index.skipped == ["level2/8_Broken.py"]

    found = index.match(REFERENCE).reason()
    assert found == "the same source as reference level2/7_Gemm_GELU_Sum.py"
    assert index.match(RENAMED).how == "the same source"
    assert index.match(SAME_OPS).reason() == (
        "the same operators (linear, gelu, sum) as reference level2/7_Gemm_GELU_Sum.py"
    )
    assert index.match(REFERENCE.replace("gelu", "relu")) is None


def test_composed_candidates_are_told_apart_by_their_operators():
    index = SignatureIndex()
    seen = {}
    for i in range(60):
        candidate = compose(4, i)
        match = index.match(candidate.source)
        if match is None:
            index.add(candidate.name, candidate.source)
            seen[candidate.ops] = candidate.name
        else:  # only a chain already seen is matched
            assert seen[candidate.ops] == match.name
