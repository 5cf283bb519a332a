"""A reply's text on the live trace while the model writes it.

A streaming backend hands over each piece it receives; sending an event per token would flood
the trace and the database, so the pieces are batched: at most one partial thought event per
interval, each carrying only the text that came since the last (the page appends them). The
whole reply's thought event follows as before, once the reply is complete, and replaces them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

PARTIAL_INTERVAL_S = 0.5


class LiveThought:
    def __init__(
        self,
        emit: Callable[[dict], None],
        turn: int,
        interval_s: float = PARTIAL_INTERVAL_S,
    ):
        self.emit = emit  # sends a thought event's payload
        self.turn = turn
        self.interval_s = interval_s
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.last_sent = time.monotonic()

    def __call__(self, text: str, reasoning: str) -> None:
        self.text.append(text)
        self.reasoning.append(reasoning)
        if time.monotonic() - self.last_sent >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Sends what came since the last partial event, if anything did."""
        text, reasoning = "".join(self.text), "".join(self.reasoning)
        self.text, self.reasoning = [], []
        self.last_sent = time.monotonic()
        if text or reasoning:
            self.emit({"turn": self.turn, "text": text, "reasoning": reasoning, "partial": True})
