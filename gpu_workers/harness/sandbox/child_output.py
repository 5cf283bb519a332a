"""What a confined child writes to its stdout, stderr or result descriptor, held in the worker's
memory and bounded. A child's output once went to temporary files on the host, each bounded
only by the child's RLIMIT_FSIZE (GiBs): a candidate that printed without end filled the
worker's disk although everything else it could write was a private tmpfs. A pipe drained by
a thread keeps the last `limit` bytes and counts the rest, so the host keeps at most `limit`
bytes of it, whatever the child writes."""

from __future__ import annotations

import os
import threading


class OutputTail:
    """A pipe whose write end a child inherits (`write_fd`); a daemon thread drains the read end
    into the last `limit` bytes. Close the parent's copy of the write end (`child_started`) once
    the child holds it, or the pipe never ends."""

    def __init__(self, limit: int):
        self.limit = limit
        self.total = 0
        self._kept = bytearray()
        self._lock = threading.Lock()
        read_fd, self.write_fd = os.pipe()
        self._drainer = threading.Thread(target=self._drain, args=(read_fd,), daemon=True)
        self._drainer.start()

    def _drain(self, read_fd: int) -> None:
        try:
            while chunk := os.read(read_fd, 1 << 16):
                with self._lock:
                    self.total += len(chunk)
                    self._kept += chunk
                    # trimmed at twice the limit, so a flood costs one copy per `limit` bytes,
                    # not one per chunk
                    if len(self._kept) > 2 * self.limit:
                        del self._kept[: len(self._kept) - self.limit]
        finally:
            os.close(read_fd)

    def child_started(self) -> None:
        if self.write_fd != -1:
            os.close(self.write_fd)
            self.write_fd = -1

    def finish(self, timeout_s: float = 5.0) -> None:
        """Waits for the end of the output: every holder of the write end has exited (a
        descendant that kept it open is the caller's to kill first)."""
        self.child_started()
        self._drainer.join(timeout_s)

    @property
    def overflowed(self) -> bool:
        return self.total > self.limit

    def data(self) -> bytes:
        """The last `limit` bytes."""
        with self._lock:
            return bytes(self._kept[-self.limit :])

    def text(self) -> str:
        """The kept tail, decoded, with a line saying how much was cut before it."""
        kept = self.data()
        cut = self.total - len(kept)
        text = readable(kept)
        return f"[... {cut} bytes cut ...]\n{text}" if cut else text


def readable(data: bytes) -> str:
    """A child's bytes as text a page and the database can hold: what is not UTF-8, and the NUL
    character (which PostgreSQL's jsonb refuses), each become U+FFFD."""
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd")
