"""Law 1 tiers and the result of classifying one shell command.

read-only < workspace-write < unknown < destructive; unknown and destructive need the operator's
approval unless the command touches artoo's own data dir (protected: refused, never approvable).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

READ_ONLY = "read-only"
WORKSPACE_WRITE = "workspace-write"
UNKNOWN = "unknown"
DESTRUCTIVE = "destructive"
RANK = {READ_ONLY: 0, WORKSPACE_WRITE: 1, UNKNOWN: 2, DESTRUCTIVE: 3}
GATED = (UNKNOWN, DESTRUCTIVE)
LAW1 = "[LAW1]"


@dataclass
class Finding:
    level: str
    reason: str
    paths: tuple[str, ...] = ()          # workspace paths deleted/overwritten: undo candidates
    snapshot: tuple[str, ...] = ()       # workspace dirs changed in ways we cannot enumerate
    protected: bool = False


@dataclass
class Classification:
    command: str
    level: str
    reason: str
    findings: list[Finding] = field(default_factory=list)
    protected: bool = False

    @property
    def needs_approval(self) -> bool:
        return self.level in GATED and not self.protected

    @property
    def paths(self) -> list[str]:
        return dedup(p for f in self.findings for p in f.paths)

    @property
    def snapshot_roots(self) -> list[str]:
        return dedup(p for f in self.findings for p in f.snapshot)

    def to_dict(self) -> dict:
        return {"command": self.command, "classification": self.level, "reason": self.reason,
                "needs_approval": self.needs_approval, "protected": self.protected,
                "paths": self.paths, "snapshot_roots": self.snapshot_roots,
                "findings": [{"level": f.level, "reason": f.reason, "paths": list(f.paths)}
                             for f in self.findings]}


def dedup(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
