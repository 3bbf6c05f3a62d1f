"""The MKCT store's on-disk layout and codec: the named sub-databases, schema version, the 16-byte
keys (ids, tags, level-index values), the 64-byte packed entry, the limits a Megram is checked
against, and the store's errors. No I/O; the store (store.py) opens LMDB with these.
"""
from __future__ import annotations

import hashlib
import os
import struct

from .mkct import ENTRY_BYTES, KEY_BYTES

SCHEMA_VERSION = 2
ENTRY = struct.Struct("<16sdddddBB6x")
LEVEL_AT = 56            # byte offsets of the level code and the flags inside a packed entry
FLAGS_AT = 57
assert ENTRY.size == ENTRY_BYTES
F8 = struct.Struct("<d")
MAX_TAG_CHARS = 1000
MAX_ID_CHARS = 128
FUTURE_SKEW_S = 300.0
DBS = ("megrams", "tags", "levels", "recall", "lifecycle", "tagnames", "meta")


class StoreError(Exception):
    """A store operation that cannot be done; the message says why."""


class StoreLocked(StoreError):
    """Another process owns this memory store."""


# ---------------------------------------------------------------------------------------------
# ids and keys
# ---------------------------------------------------------------------------------------------

def new_id(seed: bytes | None = None) -> str:
    """A 32-hex id: random, or derived from a seed so that a work message re-delivered after a
    restart writes the same Megrams instead of new copies. Random bits first keep short prefixes
    (as the CLI shows them) unique."""
    raw = hashlib.blake2b(seed, digest_size=16).digest() if seed is not None else os.urandom(16)
    return raw.hex()


def is_hex(text: str) -> bool:
    try:
        int(text, 16)
        return True
    except ValueError:
        return False


def id_key(megram_id: str) -> bytes:
    """The 16-byte key of an id: its bytes for 32-hex ids, a hash for any other string."""
    if len(megram_id) == 32 and is_hex(megram_id):
        return bytes.fromhex(megram_id)
    return hashlib.blake2b(megram_id.encode(), digest_size=KEY_BYTES).digest()


def tag_key(space: str, entity: str) -> bytes:
    return hashlib.blake2b(f"{space}\x00{entity}".encode(), digest_size=KEY_BYTES).digest()


US = struct.Struct(">Q")


def level_value(created: float, id16: bytes, tag16: bytes) -> bytes:
    return US.pack(max(0, int(created * 1e6))) + id16 + tag16


def pack_entry(id16: bytes, created: float, recalled: float, f: float, sigma: float, k: float,
               level: int, flags: int) -> bytes:
    return ENTRY.pack(id16, created, recalled, f, sigma, k, level, flags)


def unpack_entry(raw: bytes) -> tuple:
    return ENTRY.unpack(raw)
