"""The judge's line to a runner, over a real socket pair: whatever bytes a peer writes, receive
returns a JSON object or raises RunnerGone (issue 29, class 4), and never leaks the descriptors
that came with a refused message."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading

import pytest

from gpu_workers.harness.judge.channel import MAX_DEPTH, MAX_MESSAGE_BYTES, Channel, RunnerGone


@pytest.fixture
def line():
    """(the judge's Channel, the peer's raw socket)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield Channel(mine), theirs
    mine.close()
    theirs.close()


def _frame(body: bytes) -> bytes:
    return struct.pack("!I", len(body)) + body


def _send(peer: socket.socket, data: bytes) -> threading.Thread:
    """Writes from another thread: a frame larger than the socket's buffer needs a reader."""
    writer = threading.Thread(target=peer.sendall, args=(data,), daemon=True)
    writer.start()
    return writer


def _nested(depth: int) -> bytes:
    return b'{"a": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def test_a_good_message_and_its_descriptors_arrive(line):
    channel, peer = line
    Channel(peer).send({"times_ms": [1.5], "outputs": [None]}, fds=[os.dup(0)])
    message, fds = channel.receive(timeout_s=5)
    assert message == {"times_ms": [1.5], "outputs": [None]}
    assert len(fds) == 1
    os.close(fds[0])


def test_a_message_as_deep_as_allowed_arrives(line):
    channel, peer = line
    peer.sendall(_frame(_nested(MAX_DEPTH)))
    channel.receive(timeout_s=5)


@pytest.mark.parametrize(
    "body, why",
    [
        # 400 KB of brackets, under the size limit: the C decoder overflows the stack
        (b"[" * 200_000 + b"]" * 200_000, "nested deeper"),
        (b'{"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper"),
        # deeper than allowed, shallow enough to decode: caught by the walk after decoding
        (_nested(MAX_DEPTH + 1), "nested deeper"),
        (_nested(900), "nested deeper"),
        (b"\x00\xffnot json", "not JSON"),
        (b'{"outputs": [1, 2', "not JSON"),
        (b'{"flops": ' + b"9" * 5000 + b"}", "not JSON"),  # past Python's 4300-digit limit
        (b'{"copied": true, "copied": false}', "the key 'copied' twice"),
        (b'{"a": {"b": 1, "b": 2}}', "the key 'b' twice"),
        (b"[1, 2]", "not a JSON object"),
        (b"7", "not a JSON object"),
    ],
    ids=[
        "deep list",
        "deep object",
        "one level too deep",
        "deep but decodable",
        "binary",
        "truncated",
        "huge integer",
        "duplicate key",
        "nested duplicate key",
        "list",
        "number",
    ],
)
def test_a_bad_message_is_runner_gone(line, body, why):
    channel, peer = line
    assert len(body) < MAX_MESSAGE_BYTES
    writer = _send(peer, _frame(body))
    with pytest.raises(RunnerGone, match=why):
        channel.receive(timeout_s=5)
    writer.join()


def test_the_deep_frame_overflows_a_plain_decoder():
    """Known-bad for the deep cases above: json.loads alone raises, it does not refuse."""
    with pytest.raises(RecursionError):
        json.loads(b"[" * 200_000 + b"]" * 200_000)


def test_an_oversize_message_is_refused_before_it_is_read(line):
    channel, peer = line
    peer.sendall(struct.pack("!I", MAX_MESSAGE_BYTES + 1))  # the body never comes
    with pytest.raises(RunnerGone, match="bytes"):
        channel.receive(timeout_s=5)


def test_a_peer_that_stops_mid_message_is_runner_gone(line):
    channel, peer = line
    peer.sendall(struct.pack("!I", 100) + b'{"a"')
    peer.shutdown(socket.SHUT_WR)
    with pytest.raises(RunnerGone, match="closed"):
        channel.receive(timeout_s=5)


def test_descriptors_of_a_refused_message_are_closed(line):
    channel, peer = line
    sent = os.dup(0)
    peer.sendmsg(
        [_frame(b"[" * 5000 + b"]" * 5000)],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", sent))],
    )
    os.close(sent)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(RunnerGone):
        channel.receive(timeout_s=5)
    assert set(os.listdir("/proc/self/fd")) <= before


def test_nan_and_infinity_decode_as_floats(line):
    """Accepted on the line (json.dumps writes them for a problem's NaN scalar input); the
    reply schemas refuse them where a number must be finite (test_runner_replies.py)."""
    channel, peer = line
    peer.sendall(_frame(b'{"value": NaN, "big": 1e999, "low": -Infinity}'))
    message, _ = channel.receive(timeout_s=5)
    assert message["value"] != message["value"] and message["big"] == float("inf")
