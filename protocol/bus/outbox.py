"""A process's unacknowledged work messages on disk, so they survive `kill -9` of the process.

A work message lives in `BusClient._pending` (re-sent with backoff) until every consumer acks. If
the whole daemon dies at once, that memory goes with the sender, and the message with it (a
TaskSpec the planner was still planning, an outcome the meta-validator had not yet judged). With an
outbox directory set, the client writes each work message there as it first sends it and removes
the file at the last ack (or when it gives up); a restarted instance of the same role re-sends
whatever it finds, under the original message id, so a consumer that already handled it de-dups
it and one that lost it (killed too) handles it now. Role handlers are idempotent per message id
and per task, which is what makes the re-send safe.

The file is the encoded envelope plus the consumer roles; no fsync (a killed process does not
lose the page cache; a host crash loses the daemon anyway).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import msgpack

from ..envelope import pack

log = logging.getLogger("artoo.bus")


class Outbox:
    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, msg_id: str) -> Path:
        return self.dir / "".join(c if c.isalnum() or c in "-_." else "_" for c in msg_id)

    def put(self, msg_id: str, topic: bytes, payload: bytes, consumers: set[str]) -> None:
        path = self._path(msg_id)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_bytes(pack({"topic": topic, "payload": payload,
                                  "consumers": sorted(consumers)}))
            os.replace(tmp, path)
        except OSError as exc:      # durability is a recovery aid: never stop the sender
            log.warning("outbox %s: could not persist %s: %s", self.dir, msg_id, exc)

    def remove(self, msg_id: str) -> None:
        try:
            self._path(msg_id).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("outbox %s: could not remove %s: %s", self.dir, msg_id, exc)

    def load(self) -> list[tuple[bytes, bytes, set[str], float]]:
        """What a killed predecessor left unacknowledged, oldest first; unreadable files dropped.
        A file removed while this reads (its ack just came) is skipped, not an error."""
        out = []
        files = []
        for path in self.dir.iterdir():
            try:
                if not path.name.startswith("."):
                    files.append((path.stat().st_mtime_ns, path))
            except FileNotFoundError:
                continue
        for mtime_ns, path in sorted(files):
            try:
                rec = msgpack.unpackb(path.read_bytes(), raw=False)
                out.append((bytes(rec["topic"]), bytes(rec["payload"]), set(rec["consumers"]),
                            mtime_ns / 1e9))
            except FileNotFoundError:
                continue
            except Exception as exc:  # a torn or foreign file: drop it, say so
                log.warning("outbox %s: dropping unreadable %s: %s", self.dir, path.name, exc)
                path.unlink(missing_ok=True)
        return out
