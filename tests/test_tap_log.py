"""The audit log format (auditor/log.py): chain, rotation, restart, crash repair, verify.

The property test builds a 100,000-record log directly with the log module and checks that a
flipped byte, a removed record or two swapped records at seeded random positions are all detected,
with the first bad record named exactly.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from auditor import log as L

REPO = Path(__file__).resolve().parent.parent


def write_log(directory: Path, n: int, segment_bytes: int = 64 << 20, sync_every: int = 0,
              start_cseq: int = 1, fsync: bool = True) -> L.LogWriter:
    w = L.LogWriter(directory, segment_bytes=segment_bytes, fsync=fsync).open()
    for i in range(n):
        w.append(L.MSG, 1_000_000.0 + i, b"Type/task-%d" % (i % 7),
                 msgpack.packb({"i": i, "pad": "x" * (i % 50)}), 42, start_cseq + i)
        if sync_every and (i + 1) % sync_every == 0:
            w.sync()
    return w


def records(directory: Path) -> list[L.Record]:
    return list(L.iter_records(directory))


@pytest.mark.parametrize("chunk", [1, 7, 150, 4096])
def test_readers_take_a_segment_a_chunk_at_a_time_and_see_the_same_records(tmp_path, monkeypatch,
                                                                          chunk):
    """A reader holds a chunk and one record, never a whole segment: with chunks smaller than a
    record, or ending anywhere inside one, both readers return exactly what one read of the
    whole file gives (each record's bytes, segment and offset), a torn record at the end not
    included."""
    from services.runtime import auditlog
    d = tmp_path / "log"
    w = write_log(d, 400, segment_bytes=20_000)
    w.sync()
    w.close()
    last = L.list_segments(d)[-1]
    with open(last, "ab") as fh:
        fh.write(b"\x00" * 50)                  # a write in progress at the very end
    whole = [(r.seq, r.topic, r.payload, r.hash, r.segment, r.offset) for r in records(d)]
    assert len(whole) == 400
    monkeypatch.setattr(auditlog, "READ_CHUNK", chunk)
    assert [(r.seq, r.topic, r.payload, r.hash, r.segment, r.offset)
            for r in records(d)] == whole
    mid = records(d)[150]
    assert [(r.seq, r.offset) for r in L.iter_after(d, mid.seq, mid.segment, L.record_end(mid))
            ] == [(x[0], x[5]) for x in whole[151:]]


def test_iter_after_resumes_from_a_position(tmp_path):
    """A reader that stored (seq, segment, end offset) of the last record it processed gets exactly
    the records after it, across rotation, whether the hint is right, stale or absent."""
    d = tmp_path / "log"
    w = write_log(d, 1500, segment_bytes=30_000)
    w.sync()
    recs = records(d)
    assert len(recs) == 1500 and len(L.list_segments(d)) > 3
    mid = recs[700]
    got = list(L.iter_after(d, mid.seq, mid.segment, L.record_end(mid)))
    assert [r.seq for r in got] == list(range(702, 1501))
    assert [r.hash for r in got] == [r.hash for r in recs[701:]]
    assert [r.seq for r in L.iter_after(d, mid.seq)] == list(range(702, 1501))   # no hint
    wrong = list(L.iter_after(d, mid.seq, recs[100].segment, 16))                 # a stale hint
    assert [r.seq for r in wrong] == list(range(702, 1501))
    last = recs[-1]
    assert list(L.iter_after(d, last.seq, last.segment, L.record_end(last))) == []
    w.append(L.MSG, 2_000_000.0, b"Type/new", b"x", 42, 99_999)     # appended after: seen
    w.sync()
    tail = list(L.iter_after(d, last.seq, last.segment, L.record_end(last)))
    assert [(r.seq, r.topic) for r in tail] == [(1501, b"Type/new")]
    w.close()
    assert [r.seq for r in L.iter_after(d, 0)] == list(range(1, 1502))


def test_round_trip_rotation_and_chain(tmp_path):
    d = tmp_path / "log"
    write_log(d, 3000, segment_bytes=40_000).close()
    segs = L.list_segments(d)
    assert len(segs) > 5, "small segments must rotate"
    recs = records(d)
    assert [r.seq for r in recs] == list(range(1, 3001))
    assert recs[0].prev_hash == L.GENESIS
    for a, b in zip(recs, recs[1:]):
        assert b.prev_hash == a.hash            # the chain crosses segment boundaries
    assert recs[10].topic == b"Type/task-3" and msgpack.unpackb(recs[10].payload)["i"] == 10
    assert (recs[10].epoch, recs[10].cseq) == (42, 11)
    assert all(L.segment_first_seq(p) == next(r.seq for r in recs if r.segment == p.name)
               for p in segs)
    res = L.verify(d)
    assert res.ok and res.records == 3000 and res.segments == len(segs) and not res.warnings


def test_restart_continues_the_chain_and_capture_position(tmp_path):
    d = tmp_path / "log"
    write_log(d, 10).close()
    w = L.LogWriter(d).open()
    assert (w.last_seq, w.resume_epoch, w.resume_cseq) == (10, 42, 10)
    w.append(L.MSG, 2.0, b"T/-", b"after restart", 43, 1)
    w.close()
    recs = records(d)
    assert recs[-1].seq == 11 and recs[-1].prev_hash == recs[-2].hash
    assert not any(r.kind == L.REPAIR for r in recs)
    assert L.verify(d).ok


def test_torn_tail_is_cut_off_and_recorded_never_rewritten(tmp_path):
    d = tmp_path / "log"
    w = write_log(d, 100, sync_every=50)   # HEAD at 100 after the 2nd sync
    for i in range(5):                     # complete but never checkpointed
        w.append(L.MSG, 3.0, b"T/-", b"unsynced %d" % i, 42, 101 + i)
    w.flush()
    seg = w.segment
    # simulate a process killed in the middle of writing: half a record at the end
    rec, _ = L.encode_record(w.last_hash, L.MSG, 106, 4.0, 42, 106, b"T/-", b"torn" * 20)
    with open(seg, "ab") as f:
        f.write(rec[: len(rec) // 2])
    os.close(w._fd)                         # die without close(): no final sync
    os.close(w._lock_fd)
    before = seg.read_bytes()
    assert L.verify(d).ok                   # beyond the checkpoint: a warning, not damage
    w2 = L.LogWriter(d).open()
    assert w2.repairs and w2.repairs[0]["action"] == "truncated"
    assert w2.repairs[0]["bytes_removed"] == len(rec) // 2
    assert w2.resume_cseq == 105            # the complete unsynced records are kept
    w2.close()
    after = seg.read_bytes()
    cut = len(before) - len(rec) // 2
    assert after[:cut] == before[:cut]      # history untouched, only the torn bytes went
    recs = records(d)
    assert [r.seq for r in recs][-7:] == [100, 101, 102, 103, 104, 105, 106]
    repair = recs[-1]
    assert repair.kind == L.REPAIR and repair.meta()["bytes_removed"] == len(rec) // 2
    assert L.verify(d).ok


def test_damage_inside_checkpointed_history_is_left_for_verify(tmp_path):
    d = tmp_path / "log"
    write_log(d, 50).close()
    seg = L.list_segments(d)[0]
    target = [r for r in records(d) if r.seq == 20][0]
    data = bytearray(seg.read_bytes())
    data[target.offset + 60] ^= 0xFF
    seg.write_bytes(bytes(data))
    w = L.LogWriter(d).open()
    assert w.repairs[0]["action"] == "damage_left_in_place"
    assert w.repairs[0]["first_bad_seq"] == 20
    w.append(L.MSG, 5.0, b"T/-", b"later", 42, 51)
    w.close()
    assert seg.read_bytes() == bytes(data)  # the damaged segment was not touched
    assert len(L.list_segments(d)) == 2
    res = L.verify(d)
    assert not res.ok and res.first_bad_seq == 20


def test_crash_during_rotation_leaves_no_empty_segment(tmp_path):
    d = tmp_path / "log"
    write_log(d, 20).close()
    (d / L.segment_name(21)).write_bytes(L.SEGMENT_HEADER.pack(L.MAGIC, L.FORMAT_VERSION, 0)[:9])
    w = L.LogWriter(d).open()
    assert w.last_seq == 20 and len(L.list_segments(d)) == 1
    w.append(L.MSG, 6.0, b"T/-", b"x", 42, 21)
    w.close()
    assert L.verify(d).ok


def test_one_writer_per_log(tmp_path):
    d = tmp_path / "log"
    w = L.LogWriter(d).open()
    with pytest.raises(L.LogError, match="locked"):
        L.LogWriter(d).open()
    w.close()
    L.LogWriter(d).open().close()


def test_time_range_reading(tmp_path):
    d = tmp_path / "log"
    write_log(d, 2000, segment_bytes=30_000).close()
    got = list(L.iter_records(d, since=1_000_100.0, until=1_000_199.5))
    assert [r.seq for r in got] == list(range(101, 201))


# ----------------------------------------------------------------------------------------------
# tamper detection: property test over seeded random positions of a 100,000-record log
# ----------------------------------------------------------------------------------------------

N = 100_000
SEED = int(os.environ.get("ARTOO_TAMPER_SEED", "20261122"))


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    d = tmp_path_factory.mktemp("big") / "log"
    write_log(d, N, segment_bytes=2 << 20, fsync=False).close()
    index = [(r.seq, r.segment, r.offset, r.offset + L.RECORD_OVERHEAD + len(r.topic)
              + len(r.payload)) for r in L.iter_records(d)]
    assert len(index) == N and L.verify(d).ok
    return d, index


class Tamper:
    """Mutate segment files and put them back afterwards."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.saved: dict[Path, bytes] = {}

    def read(self, name: str) -> bytearray:
        path = self.dir / name
        self.saved.setdefault(path, path.read_bytes())
        return bytearray(path.read_bytes())

    def write(self, name: str, data: bytes) -> None:
        (self.dir / name).write_bytes(bytes(data))

    def restore(self) -> None:
        for path, data in self.saved.items():
            path.write_bytes(data)
        self.saved.clear()


def _expect_detected(d: Path, expected_seq: int, what: str) -> None:
    res = L.verify(d)
    assert not res.ok, f"{what}: not detected (seed {SEED})"
    assert res.first_bad_seq == expected_seq, \
        f"{what}: first bad record reported as {res.first_bad_seq} ({res.reason}), expected " \
        f"{expected_seq} (seed {SEED})"


def test_any_flipped_byte_is_detected(big_log):
    d, index = big_log
    rng = random.Random(SEED)
    segs = L.list_segments(d)
    sizes = [(p.name, p.stat().st_size) for p in segs]
    total = sum(s for _, s in sizes)
    positions = [rng.randrange(total) for _ in range(10)] + [0, total - 1]
    t = Tamper(d)
    try:
        for pos in positions:
            for name, size in sizes:
                if pos < size:
                    break
                pos -= size
            data = t.read(name)
            data[pos] ^= rng.randrange(1, 256)
            t.write(name, data)
            if pos < L.HEADER_SIZE:
                expected = L.segment_first_seq(d / name)
            else:
                expected = next(seq for seq, seg, start, end in index
                                if seg == name and start <= pos < end)
            _expect_detected(d, expected, f"byte {pos} of {name} flipped")
            t.restore()
    finally:
        t.restore()
    assert L.verify(d).ok


def test_any_removed_record_is_detected(big_log):
    d, index = big_log
    rng = random.Random(SEED + 1)
    first_of_segment = [i for i in range(1, N) if index[i][1] != index[i - 1][1]]
    picks = [rng.randrange(N) for _ in range(5)] + [0, N - 1, first_of_segment[0],
                                                    first_of_segment[0] - 1]
    t = Tamper(d)
    try:
        for i in picks:
            seq, seg, start, end = index[i]
            data = t.read(seg)
            del data[start:end]
            t.write(seg, data)
            _expect_detected(d, seq, f"record {seq} removed")
            t.restore()
    finally:
        t.restore()


def test_any_two_swapped_records_are_detected(big_log):
    d, index = big_log
    rng = random.Random(SEED + 2)
    pairs = [tuple(sorted(rng.sample(range(N), 2))) for _ in range(5)] + [(0, 1), (N - 2, N - 1)]
    t = Tamper(d)
    try:
        for a, b in pairs:
            sa, sega, a0, a1 = index[a]
            sb, segb, b0, b1 = index[b]
            rec_a, rec_b = bytes(t.read(sega)[a0:a1]), bytes(t.read(segb)[b0:b1])
            if sega == segb:
                data = t.read(sega)
                data[b0:b1] = rec_a     # the later one first, so the earlier offsets hold
                data[a0:a1] = rec_b
                t.write(sega, data)
            else:
                da, db = t.read(sega), t.read(segb)
                da[a0:a1] = rec_b
                db[b0:b1] = rec_a
                t.write(sega, da)
                t.write(segb, db)
            _expect_detected(d, sa, f"records {sa} and {sb} swapped")
            t.restore()
    finally:
        t.restore()


def test_verify_command_names_the_first_bad_record(tmp_path):
    d = tmp_path / "log"
    write_log(d, 500).close()
    cmd = [sys.executable, "-m", "services.cli", "tap", "verify", "--dir", str(d)]
    ok = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert "OK" in ok.stdout and "500 records" in ok.stdout
    target = [r for r in records(d) if r.seq == 321][0]
    seg = d / target.segment
    data = bytearray(seg.read_bytes())
    data[target.offset + L.PREFIX.size + 2] ^= 0x01
    seg.write_bytes(bytes(data))
    bad = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "seq 321" in bad.stdout and "hash mismatch" in bad.stdout
    # removing the last records is caught by the HEAD checkpoint
    write_log(tmp_path / "log2", 10).close()
    seg2 = L.list_segments(tmp_path / "log2")[0]
    last = records(tmp_path / "log2")[-1]
    seg2.write_bytes(seg2.read_bytes()[: last.offset])
    cmd2 = cmd[:-1] + [str(tmp_path / "log2")]
    tail = subprocess.run(cmd2 + ["--json"], capture_output=True, text=True, cwd=REPO)
    assert tail.returncode == 1 and '"first_bad_seq": 10' in tail.stdout
