"""Threat 6: a candidate that patches the clocks after the harness bound them changes nothing."""

import time

import torch

from gpu_workers.harness.judge import timing


def test_patched_clocks_do_not_change_measured_times(monkeypatch):
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(time, "monotonic", lambda: 0.0)
    timings, kept = timing.measure(
        {"sleepy": lambda x: (time.sleep(0.002), x + 1)[1]},
        [(torch.ones(4),), (torch.zeros(4),)],
        device="cpu",
        min_rounds=4,
        max_rounds=4,
    )
    assert timings["sleepy"].median_ms >= 2.0
    assert torch.equal(kept["sleepy"][1], torch.ones(4))  # outputs of the last timed calls


def test_spread_is_iqr_over_median():
    t = timing.Timing(times_ms=[1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    assert t.median_ms == 1.5
    assert 0.6 < t.spread < 0.8
