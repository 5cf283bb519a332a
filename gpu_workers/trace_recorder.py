"""Turns the agent's events into the run's saved trace, candidates and progress.

The agent loop calls the recorder for every event. Each becomes a TraceEvent (saved, then sent to
viewers after commit); a candidate event also stores the candidate's sources and verdict, and
moves the run's best result (agent.candidates.ranking, across the run's attempts); a status event
refreshes the run's spend. The sources and usage an event carries are stored on the Candidate and
the Run, not in the trace. (gpu_workers.heartbeat keeps the run's heartbeat.)
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from agent.candidates import beats
from gpu_workers.shown_errors import without_traceback
from webapp.runs.models import Candidate, Run, RunStatus
from webapp.runs.trace import record_event
from webapp.storable import storable


class TraceRecorder:
    def __init__(self, run: Run, context: dict):
        self.run = run
        self.context = context  # environment and protocol, stored with every verdict
        # A re-queued run continues the numbering of the attempt before it.
        last = Candidate.objects.filter(run=run).aggregate(last=Max("seq"))["last"]
        self.candidate_offset = last or 0

    def __call__(self, event: dict) -> None:
        kind, payload = event["kind"], storable(event["payload"])
        sources, usage = payload.pop("sources", {}), payload.pop("usage", None)
        if kind in ("error", "status"):  # a crash's traceback: for the log, not the trace
            for key in ("message", "detail"):
                if isinstance(payload.get(key), str):
                    payload[key] = without_traceback(payload[key], self.run.pk)
        with transaction.atomic():
            if kind == "candidate":
                payload["seq"] = self._save_candidate(payload, sources)
            if usage is not None:
                self._record_spend(usage)
            record_event(self.run, kind, payload)

    def cancel_reason(self) -> str | None:
        """Asked by the agent before each step."""
        if Run.objects.filter(pk=self.run.pk, status=RunStatus.CANCELLED).exists():
            return "cancelled by its owner"
        return None

    def _save_candidate(self, summary: dict, sources: dict[str, str]) -> int:
        seq = self.candidate_offset + summary["index"] + 1
        verdict = {"verify": summary["verify"], "profile": summary["profile"], **self.context}
        candidate, _ = Candidate.objects.update_or_create(
            run=self.run,
            seq=seq,
            defaults={
                "sources": sources,
                "verdict": verdict,
                "verified": summary["verified"],
                "speedup_vs_compile": summary["speedup_vs_compile"],
            },
        )
        if summary["verified"] and self._beats_best(candidate, summary["speedup_vs_eager"]):
            Run.objects.filter(pk=self.run.pk).update(
                best_candidate=candidate,
                best_speedup_vs_eager=summary["speedup_vs_eager"],
                best_speedup_vs_compile=summary["speedup_vs_compile"],
            )
        elif not summary["verified"]:
            self._withdraw(candidate)
        return seq

    def _withdraw(self, candidate: Candidate) -> None:
        """A candidate that verified and then failed its profile (a violation while timed) is
        no longer the run's best: the best verified one left takes its place, or none, so a run
        never ends succeeded on a kernel it no longer stands behind."""
        if not Run.objects.filter(pk=self.run.pk, best_candidate=candidate).exists():
            return
        best, best_speedup = None, None
        for other in self.run.candidates.filter(verified=True).order_by("seq"):
            speedup = (other.verdict.get("profile") or {}).get("speedup_vs_eager")
            if best is None or beats(speedup, best_speedup):
                best, best_speedup = other, speedup
        Run.objects.filter(pk=self.run.pk).update(
            best_candidate=best,
            best_speedup_vs_eager=best_speedup,
            best_speedup_vs_compile=best.speedup_vs_compile if best else None,
        )

    def _beats_best(self, candidate: Candidate, speedup: float | None) -> bool:
        """The agent's own ranking, but across attempts: a re-queued run must not replace a
        faster earlier result."""
        best_id, best_speedup = (
            Run.objects.filter(pk=self.run.pk)
            .values_list("best_candidate_id", "best_speedup_vs_eager")
            .get()
        )
        if best_id is None or best_id == candidate.pk:
            return True
        return beats(speedup, best_speedup)

    def _record_spend(self, usage: dict) -> None:
        Run.objects.filter(pk=self.run.pk).update(
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            cost_dollars=usage["cost_usd"],
        )
