"""The append-only, hash-chained audit log (DESIGN §8): segment format, writer, repair, reader, verify.

Layout under `<audit_dir>/log/`: segment files `seg-<first seq, 12 digits>.alog` and a `HEAD`
checkpoint. A segment is a 16-byte header (`ARTOOAUD`, format version, reserved) followed by
records; a record is

    prev_hash[32] | body_len u32 | body | hash[32]
    body = kind u8 | seq u64 | recv_ts f64 | epoch u64 | cseq u64 | topic_len u16 | topic | payload
    hash = SHA-256(prev_hash | body_len | body)

(all integers little-endian). `prev_hash` of the very first record is 32 zero bytes; every other
record's `prev_hash` is the previous record's hash, across segment boundaries, so flipping, removing
or reordering any byte breaks the chain at the first damaged record. Removing records from the *end*
cannot be seen from the chain alone, so the writer keeps `HEAD` (last durable seq and hash, written
atomically after every fsync) and `verify` checks the log still reaches it.

`epoch`/`cseq` are the capture relay's incarnation and sequence number (services/runtime/capture.py): the tap
resumes from the last (epoch, cseq) it wrote, which makes the log exactly-once across tap restarts.

Crash repair never rewrites history: a torn record at the end of the last segment (beyond the HEAD
checkpoint, so never acknowledged as durable) is cut off and a REPAIR record says so. Damage inside
checkpointed history is left in place for `verify` to report; the writer continues in a fresh segment
chained to the checkpoint, starting with a REPAIR record that names the damage.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from protocol.envelope import pack
from services.runtime.auditlog import (  # noqa: F401  (the reader lives in the runtime)
    FIXED_BODY, FORMAT_VERSION, GAP, GENESIS, HASH_SIZE, HEADER_SIZE, KIND_NAMES, MAGIC, MAX_BODY,
    MSG, PREFIX, RAW, RECORD_OVERHEAD, REPAIR, SEGMENT_HEADER, SEGMENT_RE, SUB, Record,
    _segment_first_ts, iter_after, iter_records, list_segments, read_head, record_end,
    segment_first_seq, segment_name)

_U32 = struct.Struct("<I")
_sha256 = hashlib.sha256


class LogError(RuntimeError):
    """The log cannot be opened for writing (locked by another tap, unreadable directory...)."""


def encode_record(prev_hash: bytes, kind: int, seq: int, recv_ts: float, epoch: int, cseq: int,
                  topic: bytes, payload: bytes) -> tuple[bytes, bytes]:
    """(record bytes, record hash) for one record chained to prev_hash."""
    head = PREFIX.pack(prev_hash, FIXED_BODY + len(topic) + len(payload), kind, seq, recv_ts,
                       epoch, cseq, len(topic))
    digest = _sha256(head)
    digest.update(topic)
    digest.update(payload)
    h = digest.digest()
    return b"".join((head, topic, payload, h)), h


@dataclass
class _Scan:
    """What a structural + hash scan of one segment found."""
    records: int = 0
    first_seq: int = 0
    last_seq: int = 0
    last_hash: bytes = GENESIS
    first_prev: Optional[bytes] = None
    valid_end: int = 0                     # byte offset just past the last good record
    size: int = 0
    header_ok: bool = True
    problem: str = ""                      # why the scan stopped before the end ("" = clean)
    last_epoch: int = 0                    # capture position of the last record that has one
    last_cseq: int = 0


def _scan_segment(path: Path) -> _Scan:
    """Walk a segment checking each record's own hash and the chain inside the segment."""
    data = path.read_bytes()
    scan = _Scan(size=len(data), first_seq=segment_first_seq(path))
    scan.last_seq = scan.first_seq - 1
    if len(data) < HEADER_SIZE or SEGMENT_HEADER.unpack_from(data, 0)[:2] != (MAGIC, FORMAT_VERSION):
        scan.header_ok = False
        scan.problem = "segment header missing or damaged"
        return scan
    off = HEADER_SIZE
    scan.valid_end = off
    n = len(data)
    mv = memoryview(data)
    prev_expected = None
    unpack = PREFIX.unpack_from
    while off < n:
        if n - off < RECORD_OVERHEAD:
            scan.problem = "incomplete record at end of segment"
            break
        prev, blen, kind, seq, _ts, epoch, cseq, _tl = unpack(data, off)
        end = off + 36 + blen
        if blen < FIXED_BODY or blen > MAX_BODY:
            scan.problem = f"record length {blen} out of range"
            break
        if end + HASH_SIZE > n:
            scan.problem = "incomplete record at end of segment"
            break
        if _sha256(mv[off:end]).digest() != data[end:end + HASH_SIZE]:
            scan.problem = "record hash mismatch"
            break
        if prev_expected is not None and prev != prev_expected:
            scan.problem = "previous-hash link broken"
            break
        if seq != scan.last_seq + 1:
            scan.problem = f"sequence {seq} where {scan.last_seq + 1} was expected"
            break
        if scan.first_prev is None:
            scan.first_prev = prev
        prev_expected = data[end:end + HASH_SIZE]
        scan.records += 1
        scan.last_seq = seq
        scan.last_hash = prev_expected
        if cseq:
            scan.last_epoch, scan.last_cseq = epoch, cseq
        off = end + HASH_SIZE
        scan.valid_end = off
    return scan


class LogWriter:
    """Appends records to the log. Single writer per directory (an exclusive flock enforces it).

    `append()` buffers, `flush()` writes the buffer to the segment (the page cache: safe from a
    killed process), `sync()` flushes, fsyncs and moves the HEAD checkpoint; the tap calls it at
    most `fsync_interval` after the first unsynced record.
    """

    def __init__(self, directory: Path, segment_bytes: int = 64 << 20, fsync: bool = True):
        self.dir = Path(directory)
        self.segment_bytes = max(segment_bytes, HEADER_SIZE + RECORD_OVERHEAD + 1024)
        self.fsync_enabled = fsync
        self.last_seq = 0
        self.last_hash = GENESIS
        self.resume_epoch = 0              # capture position of the last record written
        self.resume_cseq = 0
        self.synced_seq = 0
        self.repairs: list[dict] = []
        self._fd: Optional[int] = None
        self._lock_fd: Optional[int] = None
        self._segment: Optional[Path] = None
        self._seg_size = 0
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._dirty = False
        self.bytes_written = 0
        self.fsyncs = 0

    # -- opening and repair ---------------------------------------------------------------------
    def open(self) -> "LogWriter":
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise LogError(f"audit log {self.dir} is locked by another writer (is a tap running?)")
        head = read_head(self.dir)
        head_seq = head["seq"] if head else 0
        segments = list_segments(self.dir)
        # A last segment without a single good record and nothing checkpointed in it is the
        # leftover of a crash during rotation: it holds no history, so it goes.
        while segments:
            last = segments[-1]
            scan = _scan_segment(last)
            if scan.records == 0 and segment_first_seq(last) > head_seq:
                last.unlink()
                segments.pop()
                continue
            break
        if not segments:
            if head_seq:
                raise LogError(f"audit log {self.dir}: HEAD says seq {head_seq} but no segment "
                               f"exists; refusing to start a new chain over missing history")
            self._new_segment(1)
            return self
        last = segments[-1]
        scan = _scan_segment(last)
        prev_scan = None
        if scan.records == 0 and len(segments) > 1:
            prev_scan = _scan_segment(segments[-2])
        self.last_seq = scan.last_seq
        self.last_hash = scan.last_hash if scan.records else (
            prev_scan.last_hash if prev_scan else GENESIS)
        src = scan if scan.last_cseq else prev_scan
        if src is not None and src.last_cseq:
            self.resume_epoch, self.resume_cseq = src.last_epoch, src.last_cseq
        if not scan.problem:
            self._open_segment(last, scan.size)
            self.synced_seq = self.last_seq
            return self
        if scan.last_seq >= head_seq and scan.header_ok:
            # torn tail, never checkpointed: cut it off and say so in the chain
            removed = scan.size - scan.valid_end
            fd = os.open(last, os.O_WRONLY)
            try:
                os.ftruncate(fd, scan.valid_end)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._open_segment(last, scan.valid_end)
            note = {"action": "truncated", "segment": last.name, "offset": scan.valid_end,
                    "bytes_removed": removed, "reason": scan.problem,
                    "after_seq": self.last_seq}
        else:
            # damage inside checkpointed history: leave it for verify, continue past the checkpoint
            self.last_seq = max(head_seq, self.last_seq)
            if head:
                self.last_hash = bytes.fromhex(head["hash"])
                self.resume_epoch = int(head.get("epoch", self.resume_epoch))
                self.resume_cseq = int(head.get("cseq", self.resume_cseq))
            self._new_segment(self.last_seq + 1)
            note = {"action": "damage_left_in_place", "segment": last.name,
                    "offset": scan.valid_end, "first_bad_seq": scan.last_seq + 1,
                    "reason": scan.problem, "continued_from_seq": self.last_seq}
        self.repairs.append(note)
        self.append(REPAIR, time.time(), b"", pack(note))
        self.sync()
        return self

    def _open_segment(self, path: Path, size: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self._segment = path
        self._seg_size = size

    def _new_segment(self, first_seq: int) -> None:
        if self._fd is not None:
            self._write_buffer()
            if self.fsync_enabled:
                os.fsync(self._fd)
            os.close(self._fd)
        path = self.dir / segment_name(first_seq)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        os.write(fd, SEGMENT_HEADER.pack(MAGIC, FORMAT_VERSION, 0))
        if self.fsync_enabled:
            os.fsync(fd)
            dfd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self._fd = fd
        self._segment = path
        self._seg_size = HEADER_SIZE

    # -- appending ------------------------------------------------------------------------------
    def append(self, kind: int, recv_ts: float, topic: bytes, payload: bytes, epoch: int = 0,
               cseq: int = 0) -> int:
        """Buffer one record; returns its sequence number."""
        size = RECORD_OVERHEAD + len(topic) + len(payload)
        if self._seg_size + size > self.segment_bytes and self._seg_size > HEADER_SIZE:
            self._new_segment(self.last_seq + 1)
        seq = self.last_seq + 1
        rec, h = encode_record(self.last_hash, kind, seq, recv_ts, epoch, cseq, topic, payload)
        self._buf.append(rec)
        self._buf_bytes += len(rec)
        self._seg_size += len(rec)
        self.last_seq = seq
        self.last_hash = h
        if cseq:
            self.resume_epoch, self.resume_cseq = epoch, cseq
        if self._buf_bytes >= 1 << 20:
            self._write_buffer()
        return seq

    def _write_buffer(self) -> None:
        if not self._buf:
            return
        data = b"".join(self._buf)
        self._buf.clear()
        self._buf_bytes = 0
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.bytes_written += len(data)
        self._dirty = True

    def flush(self) -> None:
        """Hand buffered records to the kernel (survives a killed process, not a power cut)."""
        self._write_buffer()

    def sync(self) -> None:
        """Make everything appended so far durable and move the HEAD checkpoint to it."""
        self._write_buffer()
        if self._dirty and self.fsync_enabled:
            os.fsync(self._fd)
            self.fsyncs += 1
        self._dirty = False
        if self.synced_seq != self.last_seq:
            self._write_head()
            self.synced_seq = self.last_seq

    def _write_head(self) -> None:
        head = {"seq": self.last_seq, "hash": self.last_hash.hex(),
                "segment": self._segment.name if self._segment else "",
                "epoch": self.resume_epoch, "cseq": self.resume_cseq, "updated": time.time()}
        tmp = self.dir / "HEAD.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps(head).encode())
            if self.fsync_enabled:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / "HEAD")

    @property
    def segment(self) -> Optional[Path]:
        return self._segment

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.sync()
            finally:
                os.close(self._fd)
                self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "LogWriter":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


# reading: services/runtime/auditlog.py (iter_records, iter_after, list_segments, Record...)

# ----------------------------------------------------------------------------------------------
# verification
# ----------------------------------------------------------------------------------------------

@dataclass
class VerifyResult:
    ok: bool
    records: int = 0
    segments: int = 0
    bytes: int = 0
    last_seq: int = 0
    first_bad_seq: Optional[int] = None     # the sequence number the first bad record should have
    segment: str = ""
    offset: int = 0
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def verify(directory: Path) -> VerifyResult:
    """Check the whole chain: every record's hash, every link, sequence continuity, segment
    headers and names, and that the log still reaches the HEAD checkpoint. Stops at the first bad
    record and names it (the sequence number it should carry, its segment and byte offset)."""
    t0 = time.perf_counter()
    directory = Path(directory)
    res = VerifyResult(ok=True)
    segments = list_segments(directory)
    head = read_head(directory)
    if (directory / "HEAD").exists() and head is None:
        res.warnings.append("HEAD checkpoint unreadable; tail deletions cannot be checked")
    expected_seq = 1
    last_hash = GENESIS
    unpack = PREFIX.unpack_from
    sha = _sha256

    def bad(seq: int, path: Path, off: int, reason: str) -> VerifyResult:
        res.ok = False
        res.first_bad_seq, res.segment, res.offset, res.reason = seq, path.name, off, reason
        res.last_seq = expected_seq - 1
        res.elapsed_s = time.perf_counter() - t0
        return res

    head_seq = head["seq"] if head else None
    head_hash = bytes.fromhex(head["hash"]) if head else b""
    for index, path in enumerate(segments):
        res.segments += 1
        if segment_first_seq(path) != expected_seq:
            return bad(expected_seq, path, HEADER_SIZE,
                       f"segment starts at seq {segment_first_seq(path)}; the chain needs "
                       f"{expected_seq} (records missing or segment renamed)")
        data = path.read_bytes()
        res.bytes += len(data)
        n = len(data)
        if n < HEADER_SIZE or SEGMENT_HEADER.unpack_from(data, 0)[:2] != (MAGIC, FORMAT_VERSION):
            return bad(expected_seq, path, 0, "segment header damaged")
        mv = memoryview(data)
        off = HEADER_SIZE
        is_last = index == len(segments) - 1
        while off < n:
            incomplete = n - off < RECORD_OVERHEAD
            if not incomplete:
                prev, blen, _kind, seq, _ts, _ep, _cs, tl = unpack(data, off)
                end = off + 36 + blen
                if blen < FIXED_BODY + tl or blen > MAX_BODY:
                    return bad(expected_seq, path, off, f"record length {blen} is invalid")
                incomplete = end + HASH_SIZE > n
            if incomplete:
                if is_last and head_seq is not None and expected_seq > head_seq:
                    # beyond the durable checkpoint: a write in progress, or a torn write the
                    # tap cuts off (and records) when it starts
                    res.warnings.append(f"incomplete record after seq {expected_seq - 1} at the "
                                        f"end of {path.name} (not yet checkpointed)")
                    break
                return bad(expected_seq, path, off, "record cut short")
            digest = sha(mv[off:end]).digest()
            if digest != data[end:end + HASH_SIZE]:
                return bad(expected_seq, path, off, "hash mismatch: the record was altered")
            if prev != last_hash:
                return bad(expected_seq, path, off,
                           "previous-hash mismatch: a record before it was removed, reordered or "
                           "replaced")
            if seq != expected_seq:
                return bad(expected_seq, path, off, f"sequence number {seq} (expected "
                                                    f"{expected_seq})")
            if seq == head_seq and digest != head_hash:
                return bad(expected_seq, path, off, "record differs from the HEAD checkpoint")
            last_hash = digest
            expected_seq += 1
            res.records += 1
            off = end + HASH_SIZE
    res.last_seq = expected_seq - 1
    if head_seq is not None and head_seq > res.last_seq:
        where = segments[-1] if segments else directory / "HEAD"
        return bad(res.last_seq + 1, where, where.stat().st_size if segments else 0,
                   f"log ends at seq {res.last_seq} but the HEAD checkpoint says {head_seq}: "
                   f"records were removed from the end")
    if head is None and res.records:
        res.warnings.append("no HEAD checkpoint; deletions at the very end cannot be detected")
    res.elapsed_s = time.perf_counter() - t0
    return res
