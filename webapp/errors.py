"""The error body every API route returns: {"detail": "what went wrong and what to do"}."""

from ninja import Schema, Status


class ErrorOut(Schema):
    detail: str


def error(status: int, detail: str) -> Status:
    return Status(status, {"detail": detail})
