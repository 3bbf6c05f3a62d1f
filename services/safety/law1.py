"""Law 1 (seeds/000 §8, DESIGN §9): never harm the user's environment without explicit approval.

The gate's public face; its parts live beside it:

* `classify(command)` (here; the walker in shell.py, paths in paths.py, one module per command
  family in commands/) parses a shell command with bashlex (pipelines, lists, subshells, compound
  commands, functions, command and process substitution, redirections, `bash -c` / `eval` strings,
  `xargs`, `find -exec`, `sudo`/`env`/`timeout` wrappers) and puts it into one tier, with a reason:
  read-only < workspace-write < unknown < destructive. It classifies by *effect*: paths are expanded
  (`~`, `$HOME`, `$PWD`), resolved against the working directory and checked against the workspace,
  so `rm`, `/bin/rm`, `\\rm`, `r""m`, `xargs -0 rm`, `find -delete` and `$(rm …)` are all deletions,
  and `>` onto an existing file is an overwrite. Anything it cannot resolve (unknown programs, code
  run by interpreters, commands built from variables, unparseable text) is `unknown`: it fails
  closed. A command that touches artoo's own data dir is `protected`: refused, never approvable.
* `ApprovalGate` (approvals.py) asks the operator, over the bus, to approve one specific action
  (ApprovalRequest → ApprovalDecision). `--yes` pre-approves; no operator or no answer in time
  means deny.
* `UndoStore` (undo.py) keeps a copy of what an approved action deletes or overwrites inside the
  workspace under `<data dir>/undo/<run_id>/`, so `artoo undo RUN_ID` can put it back.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from protocol.settings import Settings

from .approvals import ApprovalGate, Decision, law1_refusal
from .levels import (DESTRUCTIVE, GATED, LAW1, RANK, READ_ONLY, UNKNOWN, WORKSPACE_WRITE,
                     Classification, Finding, dedup)
from .paths import mentions_path, protected_roots, spellings, within
from .shell import Ctx, Walker
from .undo import UndoStore, restore, undo_dir, undo_entries

__all__ = ["classify", "classify_for", "Classification", "Finding", "READ_ONLY", "WORKSPACE_WRITE",
           "UNKNOWN", "DESTRUCTIVE", "GATED", "LAW1", "ApprovalGate", "Decision", "law1_refusal",
           "UndoStore", "undo_dir", "undo_entries", "restore", "mentions_path", "protected_roots",
           "within"]


def classify(command: str, *, workspace: str | Path, protected: Iterable[str | Path] = (),
             cwd: str | Path | None = None, home: str | None = None) -> Classification:
    """Classify one shell command (see the module docstring)."""
    ws = os.path.realpath(workspace)
    roots = tuple(os.path.realpath(p) for p in protected)
    home = home or os.path.expanduser("~")
    env = {"HOME": home, "USER": os.environ.get("USER", ""), "LOGNAME": os.environ.get("USER", ""),
           "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    ctx = Ctx(ws, roots, home, os.path.realpath(cwd) if cwd else ws, env)
    walker = Walker(ctx)
    text = command.strip()
    if not text:
        return Classification(command, READ_ONLY, "empty command")
    if "\x00" in text:
        return Classification(command, UNKNOWN, "the command contains a NUL byte",
                              [Finding(UNKNOWN, "NUL byte")])
    for root in roots:
        for spelling in spellings(root, home):
            if mentions_path(text, spelling):
                walker.protected_hit(root)
                break
    walker.parse_and_walk(text)
    findings = walker.findings
    if not findings:
        return Classification(command, READ_ONLY, "only reads", [])
    protected_hit = any(f.protected for f in findings)
    if protected_hit:
        worst = [f for f in findings if f.protected]
        return Classification(command, DESTRUCTIVE, worst[0].reason, findings, protected=True)
    level = max((f.level for f in findings), key=RANK.__getitem__)
    reasons = dedup(f.reason for f in findings if f.level == level)
    reason = "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else "")
    return Classification(command, level, reason, findings)


def classify_for(settings: Settings, command: str, cwd: str | Path | None = None
                 ) -> Classification:
    return classify(command, workspace=settings.workspace, protected=protected_roots(settings),
                    cwd=cwd)
