"""Which candidate is the result."""

from __future__ import annotations

from agent.candidates import Candidates

A = {"model_new.py": "a"}
B = {"model_new.py": "b"}
C = {"model_new.py": "c"}


def profile(speedup: float, ok: bool = True) -> dict:
    return {"ok": ok, "speedup_vs_eager": speedup, "speedup_vs_compile": speedup / 2}


def test_the_same_sources_update_one_record():
    book = Candidates()
    first = book.record(1, A, verify={"ok": True})
    again = book.record(3, A, profile=profile(1.5))
    assert first is again and len(book.all) == 1
    assert again.turn == 3 and again.verify == {"ok": True} and again.speedup_vs_eager == 1.5


def test_the_fastest_verified_candidate_wins():
    book = Candidates()
    book.record(1, A, profile=profile(1.2))
    book.record(2, B, profile=profile(9.0, ok=False))  # a violation, however fast
    book.record(3, C, profile=profile(1.8))
    assert book.best().sources == C


def test_a_timed_candidate_beats_an_untimed_one_and_failures_never_win():
    book = Candidates()
    assert book.best() is None
    book.record(1, A, verify={"ok": False})
    assert book.best() is None
    book.record(2, B, verify={"ok": True})
    assert book.best().sources == B
    book.record(3, C, profile=profile(0.5))
    assert book.best().sources == C


def test_a_profile_held_for_a_disturbed_machine_keeps_the_candidate_verified_but_untimed():
    held = {"ok": False, "failed_by": "infrastructure", "speedup_vs_eager": 3.0}
    book = Candidates()
    book.record(1, A, profile=held)
    assert book.best().sources == A and book.best().speedup_vs_eager is None
    book.record(2, B, profile=profile(0.9))
    assert book.best().sources == B  # any timed candidate outranks it
    # known-bad beside it: a profile failed on the candidate's account never verifies
    cheat = Candidates()
    cheat.record(1, C, profile={"ok": False, "failed_by": "candidate", "speedup_vs_eager": 9.0})
    assert cheat.best() is None
