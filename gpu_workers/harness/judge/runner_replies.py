"""What a good reply to each of the judge's commands looks like, checked before the judge reads it.

A runner's replies are written by the process that runs untrusted code (the candidate's ModelNew,
the problem's Model), which can replace them with anything JSON can say. The judge reads a reply
only once it has the exact shape its command returns: the right keys and types, one entry per
slot asked for, known dtypes, bounded shapes, lists and texts, finite times. Anything else is the
sender's breach of the protocol (RunnerProcess.call turns it into RunnerDied), never an exception
out of the judge.

Every schema is a function (value, request, where) that raises BadReply; `request` is the
command's fields, for lengths the request fixes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpu_workers.harness.judge.shared_buffers import DTYPES

MAX_TENSORS = 256  # inputs or outputs of one call (flattened)
MAX_DIMS = 32
MAX_ELEMENTS = 1 << 48  # of one tensor: beyond any device's memory
MAX_COUNT = (1 << 63) - 1  # FLOPs, bytes, plain integer inputs: what fits an int64
MAX_VIOLATIONS = 64  # a trial reports at most 4 of its own
MAX_CODE = 64
MAX_TEXT = 20_000  # a violation's detail or an error (a long list of torch ops fits)
MAX_GRAPH_ITEMS = 100_000  # values in one list of a Graph IR, all nested levels together
MAX_GRAPH_DEPTH = 16

Schema = Callable[[object, dict, str], None]


class BadReply(Exception):
    """A reply unlike what its command returns; the message says where and what is wrong."""


def check(command: str, request: dict, reply: dict) -> None:
    """Raises BadReply unless `reply` is a good reply to `command` sent with `request`. A reply
    naming an error is good when it holds one text and nothing else: the runner's code raised."""
    schema = _ERROR if "error" in reply else REPLIES[command]
    schema(reply, request, "")


# ---- leaves ----


def _fail(where: str, wanted: str, value) -> None:
    raise BadReply(f"{where or 'the reply'} must be {wanted}, not {_shown(value)}")


def _shown(value) -> str:
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def flag(value, request: dict, where: str) -> None:
    if not isinstance(value, bool):
        _fail(where, "true or false", value)


def count(value, request: dict, where: str) -> None:
    if not (_is_int(value) and 0 <= value <= MAX_COUNT):
        _fail(where, "a non-negative 64-bit integer", value)


def time_ms(value, request: dict, where: str) -> None:
    number = _is_int(value) or isinstance(value, float)
    if not (number and math.isfinite(value) and value >= 0):
        _fail(where, "a finite non-negative number of ms", value)


def text(most: int) -> Schema:
    def check_text(value, request: dict, where: str) -> None:
        if not (isinstance(value, str) and len(value) <= most):
            _fail(where, f"a text of at most {most} characters", value)

    return check_text


def dtype(value, request: dict, where: str) -> None:
    if not (isinstance(value, str) and value in DTYPES):
        _fail(where, f"one of the dtypes {', '.join(DTYPES)}", value)


def shape(value, request: dict, where: str) -> None:
    if not (isinstance(value, list) and len(value) <= MAX_DIMS):
        _fail(where, f"a list of at most {MAX_DIMS} sizes", value)
    elements = 1
    for i, size in enumerate(value):
        if not (_is_int(size) and 0 <= size <= MAX_ELEMENTS):
            _fail(f"{where}[{i}]", "a non-negative size", size)
        elements *= size
    if elements > MAX_ELEMENTS:
        _fail(where, f"a shape of at most {MAX_ELEMENTS} elements", value)


def plain_value(value, request: dict, where: str) -> None:
    """What get_inputs() may return beside tensors (runner.state.describe_inputs)."""
    if value is None or isinstance(value, bool | float):
        return  # a float may be NaN or infinite: it is an input, not a measurement
    if _is_int(value) and -MAX_COUNT - 1 <= value <= MAX_COUNT:
        return
    if isinstance(value, str) and len(value) <= MAX_TEXT:
        return
    _fail(where, "null, a boolean, a 64-bit integer, a number or a short text", value)


# ---- structure ----


def record(**fields: Schema) -> Schema:
    """An object with exactly these keys, each value of its schema."""

    def check_record(value, request: dict, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, f"an object with {_keys(fields)}", value)
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise BadReply(f"{where or 'the reply'} has the unknown key {unknown[0][:40]!r}")
        for key, schema in fields.items():
            if key not in value:
                raise BadReply(f"{where or 'the reply'} lacks {key!r}")
            schema(value[key], request, f"{where}.{key}" if where else key)

    return check_record


def _keys(fields: dict) -> str:
    return "keys " + ", ".join(fields) if fields else "no keys"


def list_of(item: Schema, most: int = MAX_TENSORS) -> Schema:
    def check_list(value, request: dict, where: str) -> None:
        if not (isinstance(value, list) and len(value) <= most):
            _fail(where, f"a list of at most {most}", value)
        for i, entry in enumerate(value):
            item(entry, request, f"{where}[{i}]")

    return check_list


def nullable(schema: Schema) -> Schema:
    def check_nullable(value, request: dict, where: str) -> None:
        if value is not None:
            schema(value, request, where)

    return check_nullable


def either(first: Schema, second: Schema, wanted: str) -> Schema:
    """One of two schemas, told apart by their keys: the first where they fit it."""

    def check_either(value, request: dict, where: str) -> None:
        try:
            first(value, request, where)
        except BadReply as not_first:
            try:
                second(value, request, where)
            except BadReply:
                raise BadReply(f"{where or 'the reply'} must be {wanted} ({not_first})") from None

    return check_either


def bounded_json(value, request: dict, where: str) -> None:
    """Any JSON of at most MAX_GRAPH_ITEMS values, MAX_GRAPH_DEPTH levels deep and texts of
    MAX_TEXT: what the fusion planner reads field by field (agent/fusion), checked there."""
    pending, seen = [(value, where, 0)], 0
    while pending:
        item, at, depth = pending.pop()
        seen += 1
        if seen > MAX_GRAPH_ITEMS or depth > MAX_GRAPH_DEPTH:
            _fail(where, f"at most {MAX_GRAPH_ITEMS} values, {MAX_GRAPH_DEPTH} levels deep", value)
        if isinstance(item, dict):
            for key, entry in item.items():
                text(MAX_CODE)(key, request, f"{at} key")
                pending.append((entry, f"{at}.{key}", depth + 1))
        elif isinstance(item, list):
            pending.extend((entry, f"{at}[{i}]", depth + 1) for i, entry in enumerate(item))
        elif isinstance(item, str):
            text(MAX_TEXT)(item, request, at)
        elif isinstance(item, float) and not math.isfinite(item):
            _fail(at, "a finite number", item)
        elif item is not None and not isinstance(item, bool | int | float):
            _fail(at, "JSON", item)


def bounded_list(value, request: dict, where: str) -> None:
    """A list of bounded JSON, its values counted all together."""
    if not isinstance(value, list):
        _fail(where, "a list", value)
    bounded_json(value, request, where)


# ---- the replies ----

TENSOR = record(dtype=dtype, shape=shape)
INPUT = either(TENSOR, record(value=plain_value), "a tensor's dtype and shape, or a plain value")
VIOLATION = record(code=text(MAX_CODE), detail=text(MAX_TEXT))
OUTPUTS = list_of(TENSOR)  # what a call returned: flattened tensors' dtypes and shapes

_ERROR = record(error=text(MAX_TEXT))

REPLIES: dict[str, Schema] = {
    # both roles (runner.state.COMMON, and each side's load)
    "prepare": record(),
    "load": record(),
    "claim_device": record(),  # the candidate's, before its load (candidate_side.claim_device)
    "bind": record(),
    "release": record(),
    # one call, a trial or a timed one (runner.state.time_one, candidate_side.judged_call)
    "time": record(
        time_ms=time_ms,
        violations=list_of(VIOLATION, most=MAX_VIOLATIONS),
        outputs=nullable(OUTPUTS),  # null: forward returned no tensors, or not kept ("none")
        copied=flag,
    ),
    # the reference (reference_side.COMMANDS)
    "make": record(inputs=list_of(INPUT), outputs=OUTPUTS, shared=flag),
    "share": record(),
    "counts": record(flops=count, bytes_moved=count),
    "compiled": either(
        record(outputs=OUTPUTS, copied=flag),
        record(compile_error=text(MAX_TEXT)),
        "torch.compile's outputs, or why it failed",
    ),
    # the problem's Graph IR (capture/graph.py), for a Session's inspect_graph
    "graph": record(
        format=text(MAX_CODE),
        device=text(MAX_CODE),
        inputs=bounded_list,
        params=bounded_list,
        nodes=bounded_list,
        outputs=bounded_list,
        unsupported=list_of(text(MAX_TEXT), most=MAX_GRAPH_ITEMS),
    ),
}
