"""Bounded capture of a command's output stream: the head and a rolling tail, so memory stays
bounded even when an agent's command prints gigabytes (used by the one-shot sandbox and by the
attempt's long-lived sandbox session alike)."""
from __future__ import annotations

from collections import deque


class Capture:
    """Bounded capture of a stream: the head and a rolling tail (memory stays bounded even when
    a command prints gigabytes)."""

    def __init__(self, limit_chars: int):
        self.head_limit = max(1024, limit_chars // 3)
        self.tail_limit = max(2048, limit_chars - self.head_limit)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= self.tail_limit:
                self.tail_len -= len(self.tail[0])
                self.dropped += len(self.tail.popleft())

    def drain(self, stream) -> None:
        try:
            while True:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not chunk:
                    break
                self.feed(chunk)
        except (OSError, ValueError):
            pass
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def text(self) -> str:
        tail = b"".join(self.tail)
        if len(tail) > self.tail_limit:
            self.dropped += len(tail) - self.tail_limit
            tail = tail[-self.tail_limit:]
        if not self.dropped:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        return (f"{self.head.decode('utf-8', 'replace')}\n…[{self.dropped} bytes of output "
                f"omitted]…\n{tail.decode('utf-8', 'replace')}")
