"""Domain refusals and their HTTP status, decided once.

A domain function raises a RequestRefused subclass; the API's one exception handler
(webapp/api.py) answers {"detail": "..."} with its status, and a page puts it on its form with
`refuse_on_form`. Every error body an API route returns is {"detail": "what went wrong and what
to do"}.
"""

from __future__ import annotations

from django import forms
from ninja import Schema, Status


class ErrorOut(Schema):
    detail: str


def error(status: int, detail: str) -> Status:
    return Status(status, {"detail": detail})


class RequestRefused(Exception):
    """A well-formed request the domain refuses; the message says why and what to do."""

    status = 409

    @property
    def reasons(self) -> list[str]:
        """What a form shows, one line each."""
        return [str(self)]


class Unprocessable(RequestRefused, ValueError):
    """The request names something that does not exist or cannot be used as it is."""

    status = 422


class Conflict(RequestRefused):
    """The request is fine but the state of things forbids it now (the base's 409)."""


class TooManyRequests(Conflict):
    """A limit on how often something may be done was reached."""

    status = 429


def unknown_value(kind: str, value: object, known: list[str]) -> str:
    """The refusal of a value that names nothing, with the values that do: every API filter
    and option says it the same way."""
    return f"unknown {kind} {value!r}: use one of {', '.join(known)}"


def refuse_on_form(form: forms.Form, refusal: RequestRefused) -> int:
    """Puts the refusal's reasons on the form; returns the status its page answers with."""
    form.add_error(None, refusal.reasons)
    return refusal.status
