"""Durations as people read them on a page: "45 s", "12 min", "2 h", "1 h 30 min"."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """Whole seconds under 90 s, whole minutes under 90 min, then hours and minutes."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"
