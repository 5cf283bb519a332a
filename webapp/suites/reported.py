"""Papers' figures on KernelBench, attached to KernelBench suites as reported rows.

The figures live in one committed file, benchmarks/reported/kernelbench.json, with their citation
and URL. A suite of a level the file names (KernelBench's levels 1, 2 and 3) gets one
ReportedResult per row of its level and per row over all levels when it is imported (import_suite
or import_results); attaching again updates the rows in place, so a re-import never duplicates
them. Reported rows are shown apart and never ranked (leaderboard.metrics).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from webapp.suites.models import ReportedResult, Suite

KERNELBENCH_FIGURES = Path(settings.BASE_DIR) / "benchmarks" / "reported" / "kernelbench.json"
FIGURES = ("correct_rate", "fast_1_0_vs_compile", "geomean_speedup_vs_compile")


def attach_reported_results(suite: Suite, path: Path = KERNELBENCH_FIGURES) -> int:
    """Store the file's rows on `suite` when its level is one the figures are about; returns
    how many rows the suite has from the file (0 for any other suite)."""
    figures = json.loads(path.read_text())
    if suite.level not in figures["levels"]:
        return 0
    # a row with a level is that level's figure; one without is over all the levels
    rows = [row for row in figures["rows"] if row.get("level", suite.level) == suite.level]
    for reported in rows:
        ReportedResult.objects.update_or_create(
            suite=suite,
            entrant=reported["entrant"],
            citation=reported["citation"],
            defaults={
                "url": reported["url"],
                "note": reported["note"],
                **{field: reported[field] for field in FIGURES},
            },
        )
    return len(rows)
