"""Values as PostgreSQL stores them. A model, a candidate or a model server writes what it likes,
and jsonb and text refuse NaN and infinity, the NUL character and lone surrogates, where SQLite
(the embedded default) takes them all: whatever such a source wrote goes through `storable`
before it is saved, so a run, a grade or a health check is never lost to one character."""

from __future__ import annotations

import math
import re

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # a str's surrogates are lone ones


def storable(value):
    """`value` with NaN and infinity as null and each NUL or lone surrogate as U+FFFD, the
    replacement character; dicts and lists throughout."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {str(k): storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    return value
