"""Every candidate the run evaluated, and which one is the result.

A candidate is the writable sources at the moment the agent verified or profiled them, keyed by
their content so that profiling the same sources twice updates one record. The result is the
fastest verified candidate, whether or not the agent ever calls finish; `ranking` is the one
rule for "fastest", used here, by the worker's trace recorder (across a run's attempts) and so by
the run's end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.reward import milestone_reward
from gpu_workers.harness.vocabulary import sources_digest

_MACHINE = "infrastructure"  # a verdict's failed_by when the machine, not the code, failed


def ranking(speedup_vs_eager: float | None) -> tuple[bool, float]:
    """A verified candidate's place: a timed one beats an untimed one, then speedup over eager.

    Speedup rather than raw milliseconds: each profile times eager and the candidate interleaved,
    so the ratio cancels drift between profiles made minutes apart.
    """
    return (speedup_vs_eager is not None, speedup_vs_eager or 0.0)


def beats(speedup_vs_eager: float | None, best_speedup_vs_eager: float | None) -> bool:
    """Whether a verified candidate strictly outranks the best so far (a tie keeps the first)."""
    return ranking(speedup_vs_eager) > ranking(best_speedup_vs_eager)


@dataclass
class Candidate:
    index: int
    turn: int  # the model reply whose tool call produced the verdict
    digest: str
    sources: dict[str, str] = field(repr=False)
    verify: dict | None = None
    profile: dict | None = None

    @property
    def verified(self) -> bool:
        """Its outputs were right. A profile verifies first, and it can still fail on the
        candidate's account (faster than the speed of light, a clock that disagrees). A profile
        held only because the machine was disturbed (its failure is the infrastructure's, as
        harness/judge/failure.py names it: eager drifted while it was timed) leaves the candidate
        verified with its speed unknown, ranked below every timed one until it is measured
        again: a busy neighbour is not the agent's failure."""
        if self.profile is not None:
            return bool(self.profile.get("ok")) or self.profile.get("failed_by") == _MACHINE
        return bool((self.verify or {}).get("ok"))

    @property
    def timed(self) -> bool:
        """Its speed was measured and believed."""
        return bool((self.profile or {}).get("ok"))

    @property
    def speedup_vs_eager(self) -> float | None:
        return (self.profile or {}).get("speedup_vs_eager") if self.timed else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return (self.profile or {}).get("speedup_vs_compile") if self.timed else None

    @property
    def reward(self) -> int:
        return milestone_reward(self.verify, self.profile)

    def summary(self) -> dict:
        """Everything but the sources: what a trace event or verdict file shows."""
        return {
            "index": self.index,
            "turn": self.turn,
            "digest": self.digest,
            "files": sorted(self.sources),
            "verified": self.verified,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "reward": self.reward,
            "verify": self.verify,
            "profile": self.profile,
        }


class Candidates:
    def __init__(self) -> None:
        self.all: list[Candidate] = []

    def record(
        self,
        turn: int,
        sources: dict[str, str],
        verify: dict | None = None,
        profile: dict | None = None,
    ) -> Candidate:
        """Adds a verdict for these sources; the same sources again update their one record."""
        digest = sources_digest(sources)
        candidate = self.find(digest)
        if candidate is None:
            candidate = Candidate(len(self.all), turn, digest, dict(sources))
            self.all.append(candidate)
        candidate.turn = turn
        if verify is not None:
            candidate.verify = verify
        if profile is not None:
            candidate.profile = profile
        return candidate

    def find(self, digest: str) -> Candidate | None:
        return next((c for c in self.all if c.digest == digest), None)

    def best(self) -> Candidate | None:
        """The verified candidate that ranks first (the earliest of equals)."""
        verified = [c for c in self.all if c.verified]
        if not verified:
            return None
        return max(verified, key=lambda c: ranking(c.speedup_vs_eager))
