"""Law 1 approvals: ask the operator, over the bus, to approve one specific action
(ApprovalRequest → ApprovalDecision). `--yes` pre-approves; no operator or no answer in time means
deny, and the refusal is a `[LAW1]` tool result that must reach the final summary."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from protocol.messages import ApprovalDecision, ApprovalRequest, SubTask
from protocol.settings import Settings

from services.runtime import tasklog

from .levels import LAW1


@dataclass
class Decision:
    approved: bool
    decided_by: str
    reason: str = ""


def law1_refusal(what: str, decision: Decision) -> str:
    """The `[LAW1]` tool result for a refused action; it must reach the final summary."""
    why = {"timeout": "no answer from the operator in time", "no-operator":
           "no operator is present to approve it", "operator": "the operator declined"}.get(
        decision.decided_by, decision.decided_by)
    extra = f" ({decision.reason})" if decision.reason and decision.decided_by == "operator" \
        else ""
    return (f"{LAW1} refused: {what} — {why}{extra}. The action was not performed; do not try "
            f"to achieve it another way. Report that it needs the operator's approval "
            f"(re-run with --yes to pre-approve).")


class ApprovalGate:
    """Asks the operator to approve one specific action, over the bus (Law 1).

    The effector registers `on_decision` for ApprovalDecision with ack=True and `expects` as the
    filter, so only the effector that asked acknowledges the decision.
    """

    def __init__(self, client, subtask: SubTask, settings: Settings, *,
                 deadline_at: float = 0.0):
        self.client = client
        self.subtask = subtask
        self.settings = settings
        self.deadline_at = deadline_at
        self._lock = threading.Lock()
        self._pending: dict[str, list] = {}        # approval id -> [event, decision]
        self._count = 0

    def expects(self, env, msg) -> bool:
        return getattr(msg, "approval_id", None) in self._pending

    def on_decision(self, env, msg: ApprovalDecision) -> None:
        with self._lock:
            slot = self._pending.get(msg.approval_id)
            if slot is None or slot[1] is not None:
                return
            by = msg.decided_by or "operator"
            slot[1] = Decision(bool(msg.approved), by, msg.reason)
            slot[0].set()

    def ask(self, *, kind: str, command: str, paths: list[str], classification: str,
            reason: str) -> Decision:
        opts = self.subtask.options
        task_id = self.subtask.parent_task_id
        if opts.yes:
            decision = Decision(True, "--yes", "pre-approved by --yes")
        elif not opts.interactive:
            decision = Decision(False, "no-operator", "the run has no operator to ask")
        else:
            with self._lock:
                self._count += 1
                approval_id = f"{self.subtask.subtask_id}-a{self._count}-{os.getpid()}"
                slot = [threading.Event(), None]
                self._pending[approval_id] = slot
            request = ApprovalRequest(task_id=task_id, subtask_id=self.subtask.subtask_id,
                                      approval_id=approval_id, kind=kind, command=command,
                                      paths=paths, classification=classification, reason=reason)
            self.client.send(request, consumers=("user",), as_role="executor")
            wait = self.settings.approval_timeout_s
            if self.deadline_at:
                wait = max(0.0, min(wait, self.deadline_at - time.time()))
            slot[0].wait(wait)
            with self._lock:
                decision = slot[1] or Decision(False, "timeout",
                                               f"no decision within {wait:.0f}s")
                self._pending.pop(approval_id, None)
        tasklog.append(self.settings.tasks_dir, task_id, "approval",
                       subtask_id=self.subtask.subtask_id, action=kind, command=command,
                       paths=paths, classification=classification, reason=reason,
                       approved=decision.approved, decided_by=decision.decided_by)
        return decision
