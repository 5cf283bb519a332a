"""CUDA-Agent's milestone reward for one candidate (arXiv 2602.24286, as we read its reward).

    -1  failure: did not compile, verify or profile, or broke a rule (a violation)
     1  correct: verified, and not clearly faster than eager PyTorch
     2  correct and at least 5% faster than eager PyTorch
     3  correct and at least 5% faster than both eager PyTorch and torch.compile

Milestones rather than the raw speedup, because timing noise in a raw ratio becomes reward noise,
and one lucky outlier would dominate a batch. The 5% margin is the leaderboard's fast_1.05, so a
reward of 3 means the same as counting toward fast_1.05 against compile.
"""

from __future__ import annotations

FAILURE = -1
CORRECT = 1
FASTER_THAN_EAGER = 2
FASTER_THAN_COMPILE = 3
MARGIN = 1.05  # speedup needed to count as faster


def milestone_reward(verify: dict | None, profile: dict | None) -> int:
    """The reward of a candidate from its verdicts (profile ok implies it verified)."""
    if profile is not None and not profile.get("ok"):
        return FAILURE
    if profile is None and not (verify or {}).get("ok"):
        return FAILURE
    if profile is None:
        return CORRECT
    if (profile.get("speedup_vs_eager") or 0) < MARGIN:
        return CORRECT
    if (profile.get("speedup_vs_compile") or 0) < MARGIN:
        return FASTER_THAN_EAGER
    return FASTER_THAN_COMPILE
