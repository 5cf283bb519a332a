"""The ranges every number an API request carries is checked against, declared once.

A value out of range (or not an integer) is the API's 422 with the field and the range, and the
OpenAPI schema shows the same bounds, instead of reaching the database, where an offset or id
past 64 bits is a server error.
"""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Field, Path, Schema

from webapp.errors import Unprocessable, unknown_value

# Ids are BigAutoFields: signed 64-bit on PostgreSQL and SQLite.
ID_MAX = 2**63 - 1
# Far past the length of any list, and small enough that offset + limit stays a 64-bit integer.
OFFSET_MAX = 1_000_000_000
PAGE_MAX = 200
# Candidates and events are numbered per run in PositiveIntegerFields (32-bit on PostgreSQL).
SEQ_MAX = 2**31 - 1

# A path parameter naming a row: `run_id: RowId`.
RowId = Path[int, {"ge": 1, "le": ID_MAX, "description": "an id, from 1"}]
# A candidate's or event's number within its run.
Seq = Path[int, {"ge": 1, "le": SEQ_MAX, "description": "its number within the run, from 1"}]


def id_filter(description: str):
    """An optional query parameter that names a row."""
    return Field(None, ge=1, le=ID_MAX, description=description)


class PageParams(Schema):
    """A window on a list that is newest first."""

    limit: int = Field(50, ge=1, le=PAGE_MAX, description=f"at most {PAGE_MAX} items")
    offset: int = Field(0, ge=0, le=OFFSET_MAX, description="items to skip")


def refuse_unknown_params(request: HttpRequest, params: Schema) -> None:
    """A query parameter the route does not take (a misspelt filter, `?state=` for
    `?status=`) is a 422 naming the ones it takes, instead of being ignored: a list that
    ignored a filter would look filtered."""
    known = sorted(type(params).model_fields)
    for name in sorted(set(request.GET) - set(known)):
        raise Unprocessable(unknown_value("query parameter", name, known))
