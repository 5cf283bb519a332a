"""A board's charts as inline SVG, drawn on the server: data in, an SVG string out.

Pure functions (no database, no Django), so a test can feed them anything. Every piece of text is
escaped here, because pages insert the result as it is. A value that is not a finite number (None,
NaN, ±inf), or on a log scale one that is not positive, is skipped: a mark is a measured result,
and a made-up position would mislead. With nothing left to draw, a chart is one short sentence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import NamedTuple

EMPTY = '<p class="muted chart-empty">No ranked results yet.</p>'
# Distinguishable colours, also for the colour-blind (Okabe–Ito, then darker tones).
PALETTE = (
    "#0072b2",
    "#d55e00",
    "#009e73",
    "#cc79a7",
    "#e69f00",
    "#56b4e9",
    "#000000",
    "#8c564b",
    "#7f7f7f",
    "#6a3d9a",
)
MIN_WIDTH = 720
LEFT, RIGHT = 70, 20
PLOT_HEIGHT = 260
BAND_WIDTH = 16  # pixels per problem: a full KernelBench level (100 problems) stays legible
LEGEND_ITEM_WIDTH = 180
LABEL_CHARS = 24


class Mark(NamedTuple):
    """One entrant's value on one problem."""

    entrant: str
    problem: str
    value: float | None


class CostPoint(NamedTuple):
    """One entrant's cost per run and geometric-mean speedup."""

    entrant: str
    cost: float | None
    speedup: float | None


def speedup_by_problem(
    problems: Sequence[str], marks: Iterable[Mark], entrants: Sequence[str] = ()
) -> str:
    """(a) Speedup vs torch.compile per problem, one mark per entrant, log scale, a line at 1.
    `entrants` fixes each one's colour (the same on every chart of a board) and legend order."""
    shown = set(problems)
    kept = [m for m in marks if _positive(m.value) and m.problem in shown]
    if not kept:
        return EMPTY
    axis = _LogAxis([m.value for m in kept])
    return _per_problem_chart(
        "Speedup vs torch.compile per problem",
        "speedup vs torch.compile (log scale)",
        problems,
        kept,
        axis,
        lambda m: f"{m.entrant} · {m.problem}: {m.value:.3g}× vs torch.compile",
        entrants,
    )


def sol_by_problem(
    problems: Sequence[str], marks: Iterable[Mark], entrants: Sequence[str] = ()
) -> str:
    """(c) Fraction of the speed-of-light floor per problem and entrant, 0–100%."""
    shown = set(problems)
    kept = [m for m in marks if _finite(m.value) and m.problem in shown]
    if not kept:
        return EMPTY
    return _per_problem_chart(
        "Fraction of speed of light per problem",
        "speed-of-light floor ÷ time",
        problems,
        kept,
        _PercentAxis(),
        lambda m: f"{m.entrant} · {m.problem}: {m.value:.1%} of speed of light",
        entrants,
    )


def speedup_against_cost(
    points: Iterable[CostPoint], cost_label: str, entrants: Sequence[str] = ()
) -> str:
    """(b) One point per entrant: x its cost per run, y its geomean speedup vs torch.compile."""
    kept = [p for p in points if _finite(p.cost) and p.cost >= 0 and _positive(p.speedup)]
    if not kept:
        return EMPTY
    legend = _legend_layout([p.entrant for p in kept], entrants)
    top = 40 + legend.height
    width = MIN_WIDTH
    right_edge = width - RIGHT - LEGEND_ITEM_WIDTH // 2  # room for the labels beside the points
    x = _LinearAxis(max(p.cost for p in kept), LEFT, right_edge)
    y = _LogAxis([p.speedup for p in kept])
    height = top + PLOT_HEIGHT + 50
    parts = [
        *_frame("Speedup against cost", width, height),
        *legend.draw(LEFT, 40),
        *_y_axis(y, top, width),
        *_x_ticks(x, top),
        _axis_label(LEFT + (right_edge - LEFT) / 2, top + PLOT_HEIGHT + 38, cost_label),
        _y_label(top, "geomean speedup vs torch.compile (log scale)"),
    ]
    for point in kept:
        cx, cy = x.position(point.cost), top + y.position(point.speedup)
        tip = f"{point.entrant}: {point.speedup:.3g}× at {point.cost:.3g} ({cost_label})"
        parts.append(_dot(cx, cy, legend.colour[point.entrant], tip, radius=5))
        parts.append(
            f'<text class="point-label" x="{cx + 8:.1f}" y="{cy + 4:.1f}">'
            f"{escape(_short(point.entrant))}</text>"
        )
    return _svg(parts)


# ---- the shared layout ---------------------------------------------------------------------


def _per_problem_chart(
    title: str,
    y_label: str,
    problems: Sequence[str],
    marks: list[Mark],
    axis,
    describe: Callable[[Mark], str],
    order: Sequence[str],
) -> str:
    legend = _legend_layout([m.entrant for m in marks], order)
    top = 40 + legend.height
    width = max(MIN_WIDTH, LEFT + RIGHT + BAND_WIDTH * len(problems))
    band = (width - LEFT - RIGHT) / len(problems)
    column = {name: index for index, name in enumerate(problems)}
    entrants = list(legend.colour)
    # Entrants side by side within a problem's band, so equal values do not hide each other.
    step = band * 0.7 / len(entrants)
    # Room for the problem names, written at 55° below the axis.
    label_room = 0.82 * 6.5 * min(LABEL_CHARS, max(len(name) for name in problems)) + 24
    height = top + PLOT_HEIGHT + label_room + 24
    parts = [
        *_frame(title, width, height),
        *legend.draw(LEFT, 40),
        *_y_axis(axis, top, width),
        *_problem_labels(problems, band, top + PLOT_HEIGHT),
        _axis_label(LEFT + (width - LEFT - RIGHT) / 2, height - 6, "problem"),
        _y_label(top, y_label),
    ]
    for mark in marks:
        offset = (entrants.index(mark.entrant) - (len(entrants) - 1) / 2) * step
        cx = LEFT + (column[mark.problem] + 0.5) * band + offset
        cy = top + axis.position(mark.value)
        parts.append(_dot(cx, cy, legend.colour[mark.entrant], describe(mark)))
    return _svg(parts)


class _Legend(NamedTuple):
    colour: dict[str, str]  # entrant -> colour, in order of first appearance
    per_row: int
    height: int

    def draw(self, left: float, top: float) -> list[str]:
        parts = []
        for index, (entrant, colour) in enumerate(self.colour.items()):
            x = left + (index % self.per_row) * LEGEND_ITEM_WIDTH
            y = top + (index // self.per_row) * 18
            parts.append(
                f'<g class="legend-item"><title>{escape(entrant)}</title>'
                f'<circle cx="{x + 5}" cy="{y + 5}" r="5" fill="{colour}"/>'
                f'<text class="legend" x="{x + 14}" y="{y + 9}">{escape(_short(entrant))}</text>'
                "</g>"
            )
        return parts


def _legend_layout(drawn: Iterable[str], order: Sequence[str]) -> _Legend:
    """The entrants drawn, in `order` (then any others), each with its colour by its place there:
    an entrant keeps its colour on every chart even where some others have nothing drawn."""
    shown = set(drawn)
    everyone = list(dict.fromkeys([*order, *drawn]))
    colour = {
        entrant: PALETTE[index % len(PALETTE)]
        for index, entrant in enumerate(everyone)
        if entrant in shown
    }
    per_row = max(1, (MIN_WIDTH - LEFT - RIGHT) // LEGEND_ITEM_WIDTH)
    rows = math.ceil(len(colour) / per_row)
    return _Legend(colour, per_row, rows * 18 + 8)


def _frame(title: str, width: float, height: float) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(title)}">',
        f'<text class="chart-title" x="{LEFT}" y="22">{escape(title)}</text>',
    ]


def _svg(parts: list[str]) -> str:
    return "\n".join([*parts, "</svg>"])


def _dot(cx: float, cy: float, colour: str, tip: str, radius: float = 3.5) -> str:
    return (
        f'<circle class="mark" cx="{cx:.1f}" cy="{cy:.1f}" r="{radius}" fill="{colour}" '
        f'fill-opacity="0.85"><title>{escape(tip)}</title></circle>'
    )


def _y_axis(axis, top: float, width: float) -> list[str]:
    """Grid lines with their tick labels, the axes, and the reference line if the scale has one."""
    right = width - RIGHT
    parts = []
    for value, text in axis.ticks():
        y = top + axis.position(value)
        parts.append(_line("grid", LEFT, right, y, y))
        parts.append(
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{text}</text>'
        )
    bottom = top + PLOT_HEIGHT
    parts.append(_line("axis", LEFT, LEFT, top, bottom))
    parts.append(_line("axis", LEFT, right, bottom, bottom))
    if axis.reference is not None:
        y = top + axis.position(axis.reference)
        parts.append(_line("parity", LEFT, right, y, y, "1.0×: as fast as torch.compile"))
    return parts


def _line(kind: str, x1: float, x2: float, y1: float, y2: float, tip: str = "") -> str:
    title = f"<title>{escape(tip)}</title>" if tip else ""
    return (
        f'<line class="{kind}" x1="{x1:.1f}" x2="{x2:.1f}" y1="{y1:.1f}" y2="{y2:.1f}">'
        f"{title}</line>"
    )


def _x_ticks(axis: _LinearAxis, top: float) -> list[str]:
    bottom = top + PLOT_HEIGHT
    return [
        f'<text class="tick" x="{axis.position(value):.1f}" y="{bottom + 16}" '
        f'text-anchor="middle">{value:.3g}</text>'
        for value in axis.ticks()
    ]


def _problem_labels(problems: Sequence[str], band: float, bottom: float) -> list[str]:
    parts = []
    for index, name in enumerate(problems):
        x = LEFT + (index + 0.5) * band
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{bottom + 12}" text-anchor="end" '
            f'transform="rotate(-55 {x:.1f} {bottom + 12})"><title>{escape(name)}</title>'
            f"{escape(_short(name))}</text>"
        )
    return parts


def _axis_label(x: float, y: float, text: str) -> str:
    return (
        f'<text class="axis-label" x="{x:.1f}" y="{y:.1f}" text-anchor="middle">'
        f"{escape(text)}</text>"
    )


def _y_label(top: float, text: str) -> str:
    y = top + PLOT_HEIGHT / 2
    return (
        f'<text class="axis-label" x="16" y="{y:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {y:.1f})">{escape(text)}</text>'
    )


# ---- scales --------------------------------------------------------------------------------


class _LogAxis:
    """Values to pixels below the plot's top, log scale, always showing 1.0 (the reference)."""

    reference = 1.0

    def __init__(self, values: list[float]):
        # Padding keeps marks off the frame; 1.0 is always in range so the line is drawn.
        self.low = math.log10(min(min(values), 1.0) / 1.25)
        self.high = math.log10(max(max(values), 1.0) * 1.25)

    def position(self, value: float) -> float:
        share = (math.log10(value) - self.low) / (self.high - self.low)
        return PLOT_HEIGHT * (1 - share)

    def ticks(self) -> list[tuple[float, str]]:
        first, last = math.floor(self.low), math.ceil(self.high)
        steps = (1, 2, 5) if last - first <= 3 else (1,)
        candidates = [m * 10.0**e for e in range(first, last + 1) for m in steps]
        inside = [v for v in candidates if self.low <= math.log10(v) <= self.high]
        return [(v, f"{v:g}×") for v in inside]


class _PercentAxis:
    """A fraction from 0 to 1 as 0–100%; values outside are drawn at the edge."""

    reference = None

    def position(self, value: float) -> float:
        return PLOT_HEIGHT * (1 - min(max(value, 0.0), 1.0))

    def ticks(self) -> list[tuple[float, str]]:
        return [(v / 100, f"{v}%") for v in (0, 25, 50, 75, 100)]


class _LinearAxis:
    """0 to just above the largest value, left to right."""

    def __init__(self, largest: float, left: float, right: float):
        self.step = _nice_step(largest / 4) if largest > 0 else 1.0
        self.high = self.step * (math.floor(largest / self.step) + 1)
        self.left, self.right = left, right

    def position(self, value: float) -> float:
        return self.left + (self.right - self.left) * value / self.high

    def ticks(self) -> list[float]:
        count = round(self.high / self.step)
        return [self.step * n for n in range(count + 1)]


def _nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 × 10ⁿ at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _positive(value) -> bool:
    return _finite(value) and value > 0


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
