"""The judge's line to a runner: length-prefixed JSON messages over a Unix socket pair, with file
descriptors (shared memory on the cpu target) passed beside them.

JSON, never pickle: the judge reads what an untrusted process wrote, and unpickling runs code.
A message is bounded in size and in depth, and a peer that closes, stalls or sends garbage is a
RunnerGone. What a well-formed message says is checked by its reader (runner_replies.py for the
judge).
"""

from __future__ import annotations

import array
import json
import select
import socket
import struct
import time

MAX_MESSAGE_BYTES = 1 << 20
MAX_FDS = 64
# Nesting a message may have: the judge's deepest (a bind's buffer handles) is 4 levels. Checked
# after decoding without recursion, so no later reader (str(), a comparison) recurses deeper.
MAX_DEPTH = 32
_HEADER = struct.Struct("!I")
NO_ANSWER = "no answer in time"


class RunnerGone(Exception):
    """The peer closed the line, broke the protocol or did not answer in time."""


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        return cls(socket.socket(fileno=fd))

    def send(self, message: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
        body = json.dumps(message).encode()
        data = _HEADER.pack(len(body)) + body
        try:
            if fds:
                ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                sent = self.sock.sendmsg([data], ancillary)
            else:
                sent = self.sock.send(data)
            if sent < len(data):
                self.sock.sendall(data[sent:])
        except OSError as exc:
            raise RunnerGone(f"the line is closed ({exc.strerror or exc})") from None

    def receive(self, timeout_s: float | None = None) -> tuple[dict, list[int]]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        header, fds = self._read(_HEADER.size, deadline, with_fds=True)
        (size,) = _HEADER.unpack(header)
        if size > MAX_MESSAGE_BYTES:
            _close_all(fds)
            raise RunnerGone(f"a message of {size} bytes (at most {MAX_MESSAGE_BYTES})")
        body, more = self._read(size, deadline, with_fds=True)
        fds += more
        try:
            message = decode(body)
        except RunnerGone:
            _close_all(fds)
            raise
        return message, fds

    def _read(self, size: int, deadline: float | None, with_fds: bool) -> tuple[bytes, list[int]]:
        chunks, fds, got = [], [], 0
        while got < size:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    _close_all(fds)
                    raise RunnerGone(NO_ANSWER)
            try:
                data, ancillary, _, _ = self.sock.recvmsg(
                    size - got, socket.CMSG_SPACE(MAX_FDS * 4) if with_fds else 0
                )
            except OSError as exc:
                _close_all(fds)
                raise RunnerGone(f"the line broke ({exc.strerror or exc})") from None
            fds += _fds_of(ancillary)
            if not data:
                _close_all(fds)
                raise RunnerGone("the line was closed")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks), fds

    def close(self) -> None:
        self.sock.close()


def decode(body: bytes) -> dict:
    """One message's JSON object. NaN and Infinity literals decode as floats (json.dumps writes
    them for a problem's NaN scalar input); readers reject them where a number must be finite."""
    try:
        message = json.loads(body, object_pairs_hook=_without_duplicate_keys)
    except RecursionError:  # the C decoder recurses once per level
        raise RunnerGone(f"a message nested deeper than {MAX_DEPTH} levels") from None
    except _DuplicateKey as duplicate:
        raise RunnerGone(f"a message with the key {duplicate} twice") from None
    except ValueError:  # includes integers of more than 4300 digits
        raise RunnerGone("a message that is not JSON") from None
    if not isinstance(message, dict):
        raise RunnerGone("a message that is not a JSON object")
    if _deeper_than(message, MAX_DEPTH):
        raise RunnerGone(f"a message nested deeper than {MAX_DEPTH} levels")
    return message


class _DuplicateKey(ValueError):
    pass


def _without_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    """A key given twice would mean whichever its reader happened to keep: refused."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(repr(key[:40]))
        seen.add(key)
    return dict(pairs)


def _deeper_than(value, limit: int) -> bool:
    """Whether JSON lists and objects nest more than `limit` levels, walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack += [(child, depth + 1) for child in children]
    return False


def _fds_of(ancillary) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += array.array("i", data[:usable]).tolist()
    return fds


def _close_all(fds: list[int]) -> None:
    import os

    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
