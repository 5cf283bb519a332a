"""The progress line that suite commands print while workers validate, measure or evaluate: done
of total, failures, and an estimate from the pace seen while the command watched."""

from webapp.suites.management.waiting import progress_line
from webapp.suites.progress import Progress


def test_the_estimate_comes_from_what_finished_while_watching():
    first, now = Progress(done=10, total=100), Progress(done=12, total=100, failed=1)
    # 2 done in 60 s: 88 left take 44 min
    assert progress_line("baselines", now, first, 60.0) == (
        "baselines: 12 of 100 done, 1 failed, about 44 min left"
    )


def test_no_estimate_before_anything_finished_and_none_when_done():
    """Known-bad beside the test above: work done before the command started would claim a
    pace nobody saw."""
    first = Progress(done=50, total=100)
    assert progress_line("validation", first, first, 600.0) == "validation: 50 of 100 done"
    done = Progress(done=100, total=100)
    assert progress_line("validation", done, first, 60.0) == "validation: 100 of 100 done"
    assert progress_line("x", Progress(done=9, total=10), Progress(0, 10), 45.0).endswith(
        "about 5 s left"
    )
