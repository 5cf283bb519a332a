"""The source checks an upload meets before anything runs (shared with the harness)."""

from __future__ import annotations

import pytest

from gpu_workers.harness.problem_source import ProblemError, check_source


def test_it_offers_the_harness_protocols():
    from django.conf import settings

    from gpu_workers.harness.judge.protocol import PROTOCOLS

    assert sorted(settings.PROTOCOLS) == sorted(PROTOCOLS)


def test_it_accepts_a_problem(relu_scale):
    check_source(relu_scale)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(:\n", "syntax error on line 1"),
        ("class Model: pass\ndef get_inputs(): pass\n", "missing get_init_inputs"),
        ("x = '\ud800'\n", "not valid UTF-8"),
        ("#" * (256 * 1024 + 1), "the limit is 256 KiB"),
        ("import torch\n\nx = 1\0\n", "a NUL character on line 3"),
    ],
)
def test_it_says_what_to_fix(source, message):
    with pytest.raises(ProblemError, match=message):
        check_source(source)
