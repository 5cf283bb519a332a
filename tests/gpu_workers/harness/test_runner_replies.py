"""The schema of every runner reply (issue 29, class 4): the good replies are real ones, recorded
from runners judging relu_scale (and the code paths that write the rarer fields); each bad one is
a class of what a runner whose code was replaced could send instead."""

from __future__ import annotations

import pytest

from gpu_workers.harness.capture import graph
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.judge.runner_replies import (
    MAX_DIMS,
    MAX_ELEMENTS,
    MAX_GRAPH_ITEMS,
    MAX_TENSORS,
    MAX_TEXT,
    MAX_VIOLATIONS,
    REPLIES,
    BadReply,
    check,
)
from gpu_workers.harness.runner import candidate_side, reference_side
from tests.conftest import problem_source

TENSOR = {"dtype": "float32", "shape": [256, 1024]}
TIME = {"fn": "eager", "slot": 1, "into": "none"}
TRIAL = {"fn": "candidate", "slot": 0, "into": "lent", "observe": True}

GOOD = [
    ("load", {"device": "cpu"}, {}),
    ("bind", {"slot": 4}, {}),
    ("share", {"slot": 4}, {}),
    ("release", {"slots": [4]}, {}),
    ("release", {}, {}),
    ("make", {"slot": 4, "seed": 7}, {"inputs": [TENSOR], "outputs": [TENSOR], "shared": False}),
    (
        "make",
        {"slot": 0, "seed": 7},
        {
            "inputs": [TENSOR, {"value": 3}, {"value": float("nan")}, {"value": None}],
            "outputs": [{"dtype": "int64", "shape": []}, {"dtype": "bool", "shape": [0, 5]}],
            "shared": True,
        },
    ),
    ("compiled", {"slot": 4, "into": 6}, {"outputs": [TENSOR], "copied": True}),
    ("compiled", {"slot": 4, "into": 6}, {"compile_error": "Unsupported: data-dependent"}),
    ("counts", {"slot": 4}, {"flops": 524288, "bytes_moved": 2097152}),
    ("time", TIME, {"time_ms": 0.4629, "violations": [], "outputs": None, "copied": False}),
    (
        "time",
        {**TIME, "into": "sink"},
        {"time_ms": 0, "violations": [], "outputs": [TENSOR], "copied": True},
    ),
    ("time", TRIAL, {"time_ms": 0.21, "violations": [], "outputs": [TENSOR], "copied": True}),
    (
        "time",
        TRIAL,
        {
            "time_ms": 0.3,
            "violations": [{"code": "torch_compute", "detail": "forward ran torch ops"}],
            "outputs": None,
            "copied": False,
        },
    ),
    ("time", TRIAL, {"error": "ValueError at model_new.py:12: bad"}),  # its code raised
    ("graph", {}, graph.capture(problem_source("relu_scale"), "cpu", LOOSE)),
    ("graph", {}, graph.empty_graph("cpu", ["graph: could not load the problem"])),
]


@pytest.mark.parametrize("command, request_, reply", GOOD, ids=lambda x: str(x)[:30])
def test_a_real_reply_passes(command, request_, reply):
    check(command, request_, reply)


def test_every_command_a_runner_answers_has_a_schema():
    assert set(candidate_side.COMMANDS) | set(reference_side.COMMANDS) == set(REPLIES)


def _trial(**fields) -> dict:
    return {"time_ms": 0.2, "violations": [], "outputs": [TENSOR], "copied": True, **fields}


def _make(**fields) -> dict:
    return {"inputs": [TENSOR], "outputs": [TENSOR], "shared": False, **fields}


def _graph(**fields) -> dict:
    return {**graph.empty_graph("cuda", []), **fields}


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


BAD = {
    # the shapes the judge crashed on
    "outputs a number": ("time", TRIAL, {"outputs": 7}),
    "inputs a number": ("make", {"slot": 0}, _make(inputs=7)),
    # keys
    "a key missing": ("time", TRIAL, {"time_ms": 1.0, "outputs": [TENSOR], "copied": True}),
    "an unknown key": ("time", TRIAL, _trial(verdict="ok")),
    "keys in an empty reply": ("bind", {"slot": 0}, {"ok": True}),
    "an error with more": ("time", TRIAL, {"error": "x", "outputs": None}),
    # types
    "an error that is no text": ("load", {}, {"error": [1, 2]}),
    "a flag that is a number": ("time", TRIAL, _trial(copied=1)),
    "a tensor that is a list": ("time", TRIAL, _trial(outputs=[["float32", [1]]])),
    "an unknown dtype": ("time", TRIAL, _trial(outputs=[{"dtype": "float128", "shape": [1]}])),
    "a dtype that is a list": ("time", TRIAL, _trial(outputs=[{"dtype": [], "shape": [1]}])),
    "a shape that is text": ("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": "1,2"}])),
    "a negative size": ("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": [2, -1]}])),
    "a fractional size": ("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": [2.5]}])),
    "a boolean size": ("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": [True]}])),
    "an input of neither kind": ("make", {"slot": 0}, _make(inputs=[{"values": [1]}])),
    "an input value that is a list": ("make", {"slot": 0}, _make(inputs=[{"value": [1]}])),
    "a violation without a code": ("time", TRIAL, _trial(violations=[{"detail": "x"}])),
    "a violation code that is a number": (
        "time",
        TRIAL,
        _trial(violations=[{"code": 3, "detail": "x"}]),
    ),
    "a count that is a float": ("counts", {}, {"flops": 1.5, "bytes_moved": 4}),
    "a negative count": ("counts", {}, {"flops": -1, "bytes_moved": 4}),
    "a compiled reply of both kinds": (
        "compiled",
        {},
        {"outputs": [TENSOR], "copied": True, "compile_error": "x"},
    ),
    # numbers
    "a NaN time": ("time", TIME, _trial(time_ms=float("nan"))),
    "an infinite time": ("time", TIME, _trial(time_ms=float("inf"))),
    "a negative time": ("time", TIME, _trial(time_ms=-1.0)),
    "a time that is text": ("time", TIME, _trial(time_ms="1")),
    "a time that is a list": ("time", TIME, _trial(time_ms=[1.0, 1.0])),
    "a huge count": ("counts", {}, {"flops": 10**30, "bytes_moved": 4}),
    "a huge plain input": ("make", {"slot": 0}, _make(inputs=[{"value": -(10**30)}])),
    # bounds
    "too many dims": ("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": [1] * 33}])),
    "too many elements": (
        "time",
        TRIAL,
        _trial(outputs=[{"dtype": "int8", "shape": [MAX_ELEMENTS, 2]}]),
    ),
    "too many outputs": ("time", TRIAL, _trial(outputs=[TENSOR] * (MAX_TENSORS + 1))),
    "too many violations": (
        "time",
        TRIAL,
        _trial(violations=[{"code": "x", "detail": ""}] * (MAX_VIOLATIONS + 1)),
    ),
    "a long detail": (
        "time",
        TRIAL,
        _trial(violations=[{"code": "x", "detail": "x" * (MAX_TEXT + 1)}]),
    ),
    "a long code": ("time", TRIAL, _trial(violations=[{"code": "x" * 65, "detail": ""}])),
    "a long error": ("load", {}, {"error": "x" * (MAX_TEXT + 1)}),
    # the Graph IR: its keys, and bounded JSON inside them
    "a graph without nodes": ("graph", {}, _graph(nodes=None)),
    "a graph node that is no JSON": ("graph", {}, _graph(nodes=[{"op": float("nan")}])),
    "a graph nested past its depth": ("graph", {}, _graph(nodes=[_nested(40)])),
    "a graph of too many values": ("graph", {}, _graph(nodes=[[0] * (MAX_GRAPH_ITEMS + 1)])),
    "an unsupported entry that is no text": ("graph", {}, _graph(unsupported=[{"op": 1}])),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_reply_is_refused(case):
    command, request_, reply = BAD[case]
    with pytest.raises(BadReply):
        check(command, request_, reply)


def test_the_refusal_says_where_and_what():
    with pytest.raises(BadReply, match=r"^outputs must be a list of at most 256, not 7$"):
        check("time", TRIAL, _trial(outputs=7))
    with pytest.raises(BadReply, match=r"^outputs\[0\]\.shape\[1\] must be a non-negative size"):
        check("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": [2, -1]}]))
    with pytest.raises(BadReply, match=r"^time_ms must be "):
        check("time", TIME, _trial(time_ms=[1.0]))


def test_the_bounds_admit_what_torch_can_hold():
    """Known-good at the edges: the most dims, a long error, the most tensors."""
    check("time", TRIAL, _trial(outputs=[{"dtype": "int8", "shape": [1] * MAX_DIMS}]))
    check("time", TRIAL, _trial(outputs=[TENSOR] * MAX_TENSORS))
    check("load", {}, {"error": "x" * MAX_TEXT})
