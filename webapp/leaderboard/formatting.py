"""How a board's numbers read, on pages and in reports alike."""

from __future__ import annotations

SHARES = {"correct_rate", "geomean_coverage", "median_sol_fraction"}
SPEEDUPS = {"geomean_speedup_vs_compile", "geomean_speedup_vs_eager"}


def cells(row: dict, columns) -> list[tuple[str, str]]:
    """(column key, text) for each column: what a board's table row shows."""
    return [(key, _cell(key, row)) for key in columns]


def _cell(key: str, row: dict) -> str:
    if key == "entrant" and row.get("trained"):
        return f"{row['entrant']} (trained: {row['trained']})"
    return format_metric(key, row.get(key))


def format_metric(key: str, value) -> str:
    if value is None:
        return "—"
    if key in SHARES or key.startswith("fast_"):
        return f"{value:.0%}"
    if key in SPEEDUPS:
        return f"{value:.2f}×"
    if key == "tokens_per_run":
        return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"
    if key == "dollars_per_run":
        return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"
    if key in ("gpu_minutes_per_run", "wall_minutes_per_run"):
        return f"{value:.2f}"
    if key == "speedup_per_dollar":
        return f"{value:.2f}×/$" if value < 100 else f"{value:.0f}×/$"
    return str(value)
