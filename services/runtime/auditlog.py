"""Reading the append-only audit log (the format auditor/log.py writes): shared by the auditor's
tools and by the processes that catch up on bus messages they missed (the `world` process reads
it from the last position it durably processed). Nothing here writes.

A position is (seq, segment, offset): the last record processed and where the next one starts, so
a reader resumes without reading the log from its beginning; a stale position (segments pruned,
the log repaired) falls back to a scan by sequence number.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import msgpack

from .capture import MSG, RAW, SUB

MAGIC = b"ARTOOAUD"
FORMAT_VERSION = 1
SEGMENT_HEADER = struct.Struct("<8sII")           # magic, version, reserved
HEADER_SIZE = SEGMENT_HEADER.size                # 16
PREFIX = struct.Struct("<32sIBQdQQH")            # prev, body_len, kind, seq, ts, epoch, cseq, topic_len
FIXED_BODY = PREFIX.size - 36                    # body bytes before the topic (35)
HASH_SIZE = 32
RECORD_OVERHEAD = PREFIX.size + HASH_SIZE        # 103 bytes + topic + payload
GENESIS = bytes(HASH_SIZE)
MAX_BODY = 64 << 20                              # a body_len above this is damage, not a record
READ_CHUNK = 1 << 20                             # what a reader takes from a segment at a time
SEGMENT_RE = re.compile(r"^seg-(\d{12})\.alog$")

# record kinds: MSG, RAW and SUB are what the proxy captures (services/runtime/capture.py)
GAP = 3       # capture messages that were lost before reaching the tap (payload: msgpack map)
REPAIR = 4    # the writer repaired the log at start-up (payload: msgpack map)
KIND_NAMES = {MSG: "msg", RAW: "raw", SUB: "sub", GAP: "gap", REPAIR: "repair"}


@dataclass(slots=True)
class Record:
    seq: int
    kind: int
    recv_ts: float
    epoch: int
    cseq: int
    topic: bytes
    payload: bytes
    prev_hash: bytes
    hash: bytes
    segment: str = ""
    offset: int = 0

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, f"kind{self.kind}")

    def meta(self) -> dict:
        """The payload of a GAP/REPAIR record as a dict (empty for other kinds or bad payloads)."""
        if self.kind not in (GAP, REPAIR):
            return {}
        try:
            value = msgpack.unpackb(self.payload, raw=False)
        except Exception:
            return {}
        return value if isinstance(value, dict) else {}


def segment_name(first_seq: int) -> str:
    return f"seg-{first_seq:012d}.alog"


def list_segments(directory: Path) -> list[Path]:
    """Segment files in chain order (by first sequence number)."""
    try:
        names = [(int(m.group(1)), p) for p in Path(directory).iterdir()
                 if (m := SEGMENT_RE.match(p.name))]
    except FileNotFoundError:
        return []
    return [p for _, p in sorted(names)]


def segment_first_seq(path: Path) -> int:
    m = SEGMENT_RE.match(path.name)
    return int(m.group(1)) if m else 0


def read_head(directory: Path) -> Optional[dict]:
    """The HEAD checkpoint, or None when absent or unreadable."""
    try:
        head = json.loads((Path(directory) / "HEAD").read_text())
        head["seq"] = int(head["seq"])
        bytes.fromhex(head["hash"])
        return head
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _segment_first_ts(path: Path) -> Optional[float]:
    with open(path, "rb") as f:
        data = f.read(HEADER_SIZE + PREFIX.size)
    if len(data) < HEADER_SIZE + PREFIX.size:
        return None
    return PREFIX.unpack_from(data, HEADER_SIZE)[4]


def _segment_records(path: Path, resume: int = 0) -> Iterator[Record]:
    """One segment's records in order — from its first (its header checked) or from the byte
    offset `resume` a reader saved — up to the first structurally broken record (an incomplete
    one at the very end is a write in progress). Read a chunk at a time: a reader holds at most
    a chunk and one record, never a whole segment (up to 64 MB), so a process that catches up on
    a long backlog (the world's replay) keeps no segment-sized high-water mark."""
    try:
        fh = open(path, "rb")
    except OSError:
        return
    with fh:
        if resume >= HEADER_SIZE:
            fh.seek(resume)
            base = resume
        elif fh.read(HEADER_SIZE)[:8] == MAGIC:
            base = HEADER_SIZE
        else:
            return
        buf, off = b"", 0                       # buf[0] is at file offset `base`
        while True:
            n, want = len(buf), RECORD_OVERHEAD
            if n - off >= RECORD_OVERHEAD:
                prev, blen, kind, seq, ts, epoch, cseq, tl = PREFIX.unpack_from(buf, off)
                if blen < FIXED_BODY + tl or blen > MAX_BODY:
                    return
                end = off + 36 + blen
                if end + HASH_SIZE <= n:
                    t0 = off + PREFIX.size
                    yield Record(seq, kind, ts, epoch, cseq, buf[t0:t0 + tl], buf[t0 + tl:end],
                                 prev, buf[end:end + HASH_SIZE], path.name, base + off)
                    off = end + HASH_SIZE
                    continue
                want = end + HASH_SIZE - off
            chunk = fh.read(max(READ_CHUNK, want - (n - off)))
            if not chunk:
                return
            buf, base, off = buf[off:] + chunk, base + off, 0


def iter_records(directory: Path, since: float | None = None,
                 until: float | None = None) -> Iterator[Record]:
    """Records in chain order, optionally within [since, until] of receive time.

    Reading is lenient (it is for looking, `verify` is for checking): a segment is read up to its
    first structurally broken record; an incomplete record at the very end is a write in progress.
    Segments that end before `since` are skipped without being read.
    """
    segments = list_segments(Path(directory))
    if since is not None:
        starts = [_segment_first_ts(p) for p in segments]
        first = 0
        for i in range(1, len(segments)):
            if starts[i] is not None and starts[i] <= since:
                first = i
        segments = segments[first:]
    for path in segments:
        for rec in _segment_records(path):
            if until is not None and rec.recv_ts > until:
                return
            if since is None or rec.recv_ts >= since:
                yield rec


def iter_after(directory: Path, after_seq: int, segment: str = "",
               offset: int = 0) -> Iterator[Record]:
    """Records with seq > after_seq, in chain order. `segment`/`offset` (from the Record last
    processed: its segment and the offset just past it) let the reader start there; when they do
    not lead to seq after_seq + 1 the segments are scanned by their first sequence numbers."""
    segments = list_segments(Path(directory))
    first = 0
    for i, p in enumerate(segments):
        if segment_first_seq(p) <= after_seq + 1:
            first = i
    for i, path in enumerate(segments[first:]):
        resume = offset if i == 0 and segment == path.name and offset >= HEADER_SIZE else 0
        for rec in _segment_records(path, resume):
            if rec.seq > after_seq:
                yield rec


def record_end(rec: Record) -> int:
    """The offset just past `rec` in its segment: where a reader resumes."""
    return rec.offset + PREFIX.size + len(rec.topic) + len(rec.payload) + HASH_SIZE
