"""MKCT convolution math (seeds/000 §4.4, §4.7): pure functions, no I/O. The tag conventions and
the quantization matrix that roles use too are in services/runtime/mkct.py.

Potentials over the Megrams of one (space, entity) tag pair, with Δt in days measured from the decay
origin max(created, last_recalled):

    attention = Σ |f|·e^{−kΔt}        (unsigned energy: "where to look")
    decision  = Σ σ·f·e^{−kΔt}        (signed preference: "what to do")

Action: attention < 0.5 → Ignore; decision > 0.2 → Exploit; decision < −0.2 → Avoid; else Caution
(±0.2 inclusive). Everything here works on numpy structured arrays of the packed index entries
(`ENTRY_DTYPE`) so a 100k-Megram tag is one vectorised pass, and on scalars for single entries.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SECONDS_PER_DAY = 86_400.0

# ---------------------------------------------------------------------------------------------
# levels, flags and the packed index entry
# ---------------------------------------------------------------------------------------------

LEVELS = ("M", "K", "C", "T")
LEVEL_CODE = {name: code for code, name in enumerate(LEVELS)}
DECAYING_LEVELS = (LEVEL_CODE["M"], LEVEL_CODE["K"])     # the only levels GC may delete
RULE_LEVELS = (LEVEL_CODE["C"], LEVEL_CODE["T"])         # timeless rules returned by QueryC
FLAG_CONSOLIDATED = 0x01                                 # distilled into a C rule by the Dreamer
FLAG_LIFECYCLE = 0x02                                    # has a record in the lifecycle sub-db

# One index entry per Megram, stored as a fixed-size duplicate value under its tag key (64 bytes).
# The id comes first so duplicates sort by id and one entry can be found with a range seek.
# f, σ, k stay float64: float32 would move sums such as 0.6 − 0.4 across the ±0.2 boundary.
ENTRY_DTYPE = np.dtype([("id", "V16"), ("created", "<f8"), ("recalled", "<f8"), ("f", "<f8"),
                        ("sigma", "<f8"), ("k", "<f8"), ("level", "u1"), ("flags", "u1"),
                        ("pad", "V6")])
ENTRY_BYTES = ENTRY_DTYPE.itemsize
KEY_BYTES = 16
# What LMDB's GET_MULTIPLE returns with keyfixed=True: the tag key before every entry. Keys are
# raw void bytes: an "S16" field would drop trailing NUL bytes of an id.
KEYED_ENTRY_DTYPE = np.dtype([("tag", f"V{KEY_BYTES}")] + [(n, ENTRY_DTYPE.fields[n][0])
                                                          for n in ENTRY_DTYPE.names])
assert ENTRY_BYTES == 64 and KEYED_ENTRY_DTYPE.itemsize == 80

# ---------------------------------------------------------------------------------------------
# potentials
# ---------------------------------------------------------------------------------------------

IGNORE_BELOW = 0.5
DECISION_BAND = 0.2


@dataclass(frozen=True)
class Potentials:
    attention: float
    decision: float
    action: str


def decay(k: float, origin: float, now: float) -> float:
    """e^{−kΔt}, Δt in days since the decay origin (never negative: clock skew counts as fresh)."""
    return math.exp(-k * max(0.0, now - origin) / SECONDS_PER_DAY)


def classify(attention: float, decision: float, ignore_below: float = IGNORE_BELOW,
             band: float = DECISION_BAND) -> str:
    """The planning action for a pair of potentials. Values are rounded to 1e-9 first so that
    float noise (0.6 − 0.4 = 0.19999999999999996) cannot move a result across a boundary."""
    attention, decision = round(attention, 9), round(decision, 9)
    if attention < ignore_below:
        return "Ignore"
    if decision > band:
        return "Exploit"
    if decision < -band:
        return "Avoid"
    return "Caution"


def weights(entries: np.ndarray, now: float) -> np.ndarray:
    """Per-entry decay e^{−kΔt} (float64) from the decay origin max(created, recalled)."""
    origin = np.maximum(entries["created"], entries["recalled"])
    dt_days = np.maximum(0.0, now - origin) / SECONDS_PER_DAY
    return np.exp(-entries["k"].astype(np.float64) * dt_days)


def contributions(entries: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry (attention, decision) contributions: |f|·w and σ·f·w."""
    w = weights(entries, now)
    f = entries["f"].astype(np.float64)
    return np.abs(f) * w, entries["sigma"].astype(np.float64) * f * w


def potentials(entries: np.ndarray, now: float, ignore_below: float = IGNORE_BELOW,
               band: float = DECISION_BAND) -> Potentials:
    if len(entries) == 0:
        return Potentials(0.0, 0.0, "Ignore")
    att, dec = contributions(entries, now)
    attention, decision = float(att.sum()), float(dec.sum())
    return Potentials(attention, decision, classify(attention, decision, ignore_below, band))


def strongest(att: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n largest attention contributions, strongest first."""
    if n <= 0 or len(att) == 0:
        return np.empty(0, dtype=np.int64)
    if len(att) > n:
        idx = np.argpartition(-att, n - 1)[:n]
    else:
        idx = np.arange(len(att))
    return idx[np.argsort(-att[idx], kind="stable")]


# ---------------------------------------------------------------------------------------------
# Dreamer decisions (seeds/000 §4.7), as pure functions of the entries of one tag
# ---------------------------------------------------------------------------------------------

def gc_mask(entries: np.ndarray, att: np.ndarray, threshold: float) -> np.ndarray:
    """M/K entries whose own live attention fell below the threshold; C and T are never collected."""
    return np.isin(entries["level"], DECAYING_LEVELS) & (np.round(att, 12) < threshold)


def consolidation_signal(attention: float, decision: float, min_attention: float,
                         min_decision: float) -> str | None:
    """"best_practice", "constraint" or None for a group of unconsolidated M/K Megrams."""
    if attention < min_attention:
        return None
    if decision >= min_decision:
        return "best_practice"
    if decision <= -min_decision:
        return "constraint"
    return None


def newer_evidence_decision(entries: np.ndarray, dec: np.ndarray, rule_index: int) -> float:
    """Decision potential of the M/K evidence created strictly after the rule at rule_index.

    The rule itself (and the sources it was distilled from, which are older) never count, so a
    freshly promoted Constraint cannot bankrupt itself (the Go reference's self-contribution bug).
    """
    created = entries["created"][rule_index]
    newer = np.isin(entries["level"], DECAYING_LEVELS) & (entries["created"] > created)
    newer[rule_index] = False
    return float(dec[newer].sum())


def contradicts(rule_sigma: float, newer_decision: float, tolerance: float = 0.0) -> bool:
    """Newer evidence contradicts a rule when its decision points the other way: a Best Practice
    (σ > 0) by net-negative evidence, a Constraint (σ ≤ 0) by net-positive evidence."""
    if rule_sigma > 0:
        return newer_decision < -tolerance
    return newer_decision > tolerance
