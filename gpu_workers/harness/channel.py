"""The judge's line to a runner: length-prefixed JSON messages over a Unix socket pair, with file
descriptors (shared memory on the cpu target) passed beside them.

JSON, never pickle: the judge reads what an untrusted process wrote, and unpickling runs code.
A message is bounded in size, and a peer that closes, stalls or sends garbage is a RunnerGone.
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
            message = json.loads(body)
        except ValueError:
            _close_all(fds)
            raise RunnerGone("a message that is not JSON") from None
        if not isinstance(message, dict):
            _close_all(fds)
            raise RunnerGone("a message that is not a JSON object")
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
