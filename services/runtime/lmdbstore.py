"""An LMDB environment owned by one process: what the memory and world stores share.

Why one owner: LMDB allows one writer at a time across processes, but two server processes on one
data directory would each believe they own it (two `artoo up`s with the same ARTOO_HOME); an flock
on `owner.lock` makes the second refuse to start with a message that says what to do. Every
environment is opened with synced commits, so an acknowledged change survives SIGKILL.
"""
from __future__ import annotations

import fcntl
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

import lmdb
import msgpack

from protocol.envelope import pack


class OwnedEnv:
    """The environment at `path`, its named sub-databases, and (unless read-only) the owner lock.

    `what` names the store in messages ("memory", "world"); `error` is raised when the store
    cannot be opened, `locked` when another process owns it. The sub-databases in `dup` keep
    many fixed-size values per key, those in `dupsort` many values of any size (≤ 511 bytes)."""

    def __init__(self, path: Path | str, *, what: str, dbs: Iterable[str], map_size: int,
                 error: type[Exception], locked: type[Exception], readonly: bool = False,
                 dup: Iterable[str] = (), dupsort: Iterable[str] = (), max_readers: int = 126):
        self.path = Path(path)
        self.what = what
        self.error = error
        self.lock_fd: int | None = None
        dbs, dup, dupsort = list(dbs), set(dup), set(dup) | set(dupsort)
        if not readonly:
            self.path.mkdir(parents=True, exist_ok=True)
            self.lock_fd = self._acquire(locked)
        elif not (self.path / "data.mdb").exists():
            raise error(f"no {what} store at {self.path}")
        try:
            self.env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(dbs) + 1,
                                 subdir=True, readonly=readonly, sync=True, metasync=True,
                                 max_readers=max_readers, lock=True)
        except lmdb.Error as exc:
            self.release()
            raise error(f"cannot open the {what} store at {self.path}: {exc}") from exc
        self.db = {name: self.env.open_db(name.encode(), create=not readonly,
                                          dupsort=name in dupsort, dupfixed=name in dup)
                   for name in dbs}

    def _acquire(self, locked: type[Exception]) -> int:
        fd = os.open(self.path / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise locked(f"another {self.what} process owns {self.path}; stop it first "
                         f"(artoo down) or use another ARTOO_HOME") from None
        return fd

    def release(self) -> None:
        """Release the owner lock (after closing the environment)."""
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None

    def check_schema(self, version: int, meta: str = "meta") -> None:
        """Write the schema version into a new store; refuse a store of another version."""
        with self.env.begin(write=True, db=self.db[meta]) as txn:
            raw = txn.get(b"schema")
            if raw is None:
                txn.put(b"schema", pack(version))
            elif msgpack.unpackb(raw) != version:
                raise self.error(f"{self.what} store schema {msgpack.unpackb(raw)} is not "
                                 f"{version}")


class ResizeGate:
    """Lets readers share an environment and a map resize have it alone: LMDB's readers need no
    lock against its writer (each sees the last commit), but growing the map must wait until no
    transaction of this process is open."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._resizing = False

    @contextmanager
    def shared(self):
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()
