"""CUDA-Agent's milestone reward."""

from __future__ import annotations

import pytest

from agent.reward import milestone_reward

PASSED = {"ok": True}


def profiled(eager: float | None, compiled: float | None) -> dict:
    return {"ok": True, "speedup_vs_eager": eager, "speedup_vs_compile": compiled}


@pytest.mark.parametrize(
    "verify,profile,reward",
    [
        (None, None, -1),
        ({"ok": False}, None, -1),
        (PASSED, {"ok": False, "violations": [{"code": "sol"}]}, -1),  # too fast to be true
        (None, {"ok": False}, -1),
        (PASSED, None, 1),  # verified, never timed
        (PASSED, profiled(1.04, 0.5), 1),  # within the 5% margin of eager
        (PASSED, profiled(1.05, 0.9), 2),
        (PASSED, profiled(3.0, 1.04), 2),
        (None, profiled(3.0, 1.05), 3),  # a profile verifies first
        (PASSED, profiled(3.0, None), 2),  # no compile baseline: not proven faster than it
    ],
)
def test_milestones(verify, profile, reward):
    assert milestone_reward(verify, profile) == reward
