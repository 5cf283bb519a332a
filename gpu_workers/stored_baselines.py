"""The site's stored baselines, lent to the harness on the worker about to judge a problem.

A run's profile and a re-grade compare a candidate with the harness's baselines of the problem,
cached per machine and measured once (under the GPU lock, torch.compile's compiles included: a
KernelBench level 1 convolution held the lock over two minutes, every other run's judged steps
waiting behind it). The site already stores baselines per problem, GPU type and protocol (the
Baseline row, what the board divides by), so a worker whose cache has none adopts the row's,
where they were measured by the same method on the same GPU model with the same torch and CUDA
(profile.adopt_baselines): one set of baselines for the run, the re-grade and the board, and no
measurement a machine has already made elsewhere. Anything else measures as before.
"""

from __future__ import annotations

import datetime as dt
import logging

from gpu_workers.harness.judge import profile
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.vocabulary import device_for
from webapp.suites.models import Baseline

log = logging.getLogger(__name__)
# Rows measured before the method was stored with them (environment["method"]) and after the
# method of profile.BASELINE_METHOD 5 came in (commit 5114b5b) are of that method.
_METHOD_5_SINCE = dt.datetime(2026, 11, 26, 17, 0, tzinfo=dt.UTC)


def lend(problem, gpu_type: str, protocol: Protocol) -> bool:
    """Puts the stored baselines of `problem` on `gpu_type` into this worker's harness cache,
    where it has none and they fit this machine. True when they were lent."""
    row = (
        Baseline.objects.filter(
            problem=problem, gpu_type=gpu_type, protocol=protocol.name, measured__isnull=False
        )
        .exclude(error__gt="")  # failed, or measured on a busy machine: not worth lending
        .first()
    )
    if row is None or not problem.source:
        return False
    stored = {
        "eager_ms": row.eager_ms,
        "compile_ms": row.compile_ms,
        "compile_max_autotune_ms": row.compile_max_autotune_ms,
        "flops": problem.flops,
        "bytes_moved": problem.bytes_moved,
        "environment": _with_method(row),
    }
    lent = profile.adopt_baselines(problem.source, device_for(gpu_type), protocol, stored)
    if lent:
        log.info("baselines of problem %s on %s: the stored ones", problem.pk, gpu_type)
    return lent


def _with_method(row: Baseline) -> dict:
    environment = dict(row.environment or {})
    if "method" not in environment and row.measured >= _METHOD_5_SINCE:
        environment["method"] = 5
    return environment
