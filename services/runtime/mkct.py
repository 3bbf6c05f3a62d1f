"""MKCT helpers that roles and the memory server share (seeds/000 §4.2, §4.3): the tag conventions
and the GGS quantization matrix. Pure, no I/O; the convolution math stays in memory_server/mkct.py.
"""
from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# the GGS quantization matrix (seeds/000 §4.3): macro-state → (f, σ, k)
# ---------------------------------------------------------------------------------------------

QUANTIZATION: dict[str, tuple[float, float, float]] = {
    "abandon": (0.95, -1.0, 0.05),
    "accept": (0.90, +1.0, 0.05),
    "change_approach": (0.85, -1.0, 0.05),
    "success": (0.80, +1.0, 0.05),
    "break_symmetry": (0.75, +1.0, 0.05),
    "change_path": (0.30, 0.0, 0.2),
    "refine": (0.10, +0.5, 0.5),
}

# ---------------------------------------------------------------------------------------------
# tag conventions (seeds/000 §4.2): macro events on the intent, micro events on tool × target
# ---------------------------------------------------------------------------------------------

ENV_LOCAL = "env:local"
GLOBAL_USER = "global:user"      # where operator-remembered rules live by default


def intent_space(slug: str) -> str:
    """The space tag of a task intent: `intent:<slug>` (idempotent on an already-prefixed slug)."""
    slug = (slug or "").strip()
    return slug if slug.startswith("intent:") else f"intent:{slug}"


def tool_space(tool: str) -> str:
    return f"tool:{tool}"


def target_entity(target: str) -> str:
    return f"target:{target}"
