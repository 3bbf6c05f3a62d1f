"""Evidence a task's earlier rounds gathered, for the checks of a later round (R4a).

Each GGS round is a new subtask with a new checker: without this, what round 1's independent
check derived was gone in round 2, and an answer it contradicted could end "done" there when
round 2's own checks could not run (dev count-error-entries: round 1's query printed 5, round 2
answered 9 with no check that ran). A subtask's `subtask_end` records the checks that ran and
the state of the inputs they read; a later subtask of the same goal on the same inputs treats
one that contradicts its answer as a check in another form that disagrees: never outvoted, and
"failed" where this round's own agreement is no evidence. The files a failed round changed
are likewise no state of the user's for a later round (`rejected_files`). Within a subtask, an
answer the executor gives again against the one check that contradicted it is settled by a
check in the other form (`stands_by`)."""
from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Iterator, Optional

from protocol.messages import ToolCallRecord

from services.runtime import tasklog
from services.safety import evidence as ev, referents
from services.safety.tools import head_tail
from .confirm import _norm_cmd, _outputs, _read
from .law0report import Law0Report

if TYPE_CHECKING:
    from .verifier import Verifier


def inputs_digest(verifier: Verifier, skip: frozenset = frozenset()) -> str:
    """The workspace before the subtask, by path and content: the same digest, the same inputs.
    `skip`: files an earlier, failed round left (the output it wrote is no input)."""
    h = hashlib.sha256()
    for path, state in sorted(verifier.before.items()):
        if path not in skip:
            h.update(f"{path}\0{state.digest or state.size}\n".encode())
    return h.hexdigest()


def record(verifier: Verifier) -> dict:
    """The `subtask_end` fields a later round reads: the goal, the inputs, the checks that ran
    (not a recalled fact, not one that changed files: their output is a derived answer)."""
    checks = [{"label": c.label, "output": c.output[:2000],
               **({"file": c.output_file} if c.output_file else {})}
              for c in [verifier.derived, *verifier.shown]
              if c is not None and c.available and not c.recalled and c.effects is None
              and c.output.strip()]
    return {"goal": verifier.goal, "derived": checks,
            "inputs": inputs_digest(verifier, frozenset(rejected_files(verifier)))}


def _earlier_ends(verifier: Verifier) -> Iterator[dict]:
    """The `subtask_end` events of this task's other subtasks (its earlier rounds)."""
    for event in tasklog.read(verifier.settings.tasks_dir, verifier.task_id):
        if event.get("kind") == "subtask_end" and \
                event.get("subtask_id") != verifier.subtask.subtask_id:
            yield event


def rejected_files(verifier: Verifier) -> set[str]:
    """The files that earlier rounds which failed created or changed: what a later round finds
    there is no state of the user's (filecheck.check_file)."""
    return {p for event in _earlier_ends(verifier) if event.get("status") == "failed"
            for p in event.get("changed") or [] if isinstance(p, str)}


def _earlier_checks(verifier: Verifier) -> Iterator[dict]:
    """The checks earlier rounds of this goal ran on the same inputs (the files a failed round
    wrote aside)."""
    digest = None
    for event in _earlier_ends(verifier):
        if event.get("goal") != verifier.goal:
            continue
        if digest is None:
            digest = inputs_digest(verifier, frozenset(rejected_files(verifier)))
        if event.get("inputs") == digest:
            yield from event.get("derived") or []


def contradicted(verifier: Verifier, report: Law0Report, checks: Optional[list[dict]] = None,
                 where: str = "an earlier round of this task ran") -> Optional[str]:
    """The earlier round's check (or one of `checks`) that contradicts this answer (as many
    values, not the same ones; or fewer, all of which the answer lists with others),
    described; None when there is none."""
    answer = report.answer
    if not ev.answer_values(answer):
        return None
    stated = ev.answer_values(answer)
    for check in _earlier_checks(verifier) if checks is None else checks:
        output = str(check.get("output") or "")
        values = ev.answer_values(output)
        # an answer that lists the check's value among others is a list of candidates (dev
        # section-timeout: "30 5 45 300" for one section's timeout, after a check printed 30)
        spray = bool(values) and set(values) < set(stated)
        if check.get("file") or not spray and (len(values) != len(stated) or ev.agree(
                answer, output, goal=verifier.goal).agree):
            continue
        return (f"an independent check {where} "
                f"(`{head_tail(str(check.get('label') or ''), 120)}`) printed "
                f"{head_tail(output.strip(), 200)}" +
                (", which the answer lists among other values" if spray else ""))
    return None


def apply(verifier: Verifier, report: Law0Report) -> Law0Report:
    """A verified answer an earlier round's check contradicts is unverified; one whose agreement
    here is no evidence (or that no check here could confirm) fails, showing that check. The
    same for the content of a file the goal makes (`_apply_file`)."""
    if report.kind not in ("verified", "unverified"):
        return report
    if ev.asks_to_change(verifier.goal):
        return _apply_file(verifier, report)
    against = contradicted(verifier, report)
    if against is None:
        # within this round: an independent check a correction showed the executor, which
        # derived another value, outvoted by later checks that agree — never verified (the
        # scripted case: 3 refuted by a query's 2, then answered again and "confirmed" by two
        # checks that read the data the refuted way)
        shown = [{"label": c.label, "output": c.output, "file": c.output_file}
                 for c in verifier.shown if c.available and c.effects is None]
        within = contradicted(verifier, report, shown, "a correction showed the executor")
        if within and report.kind == "verified":
            report.kind = "unverified"
            report.unverified.append(f"{within}: the checks disagree, and \"verified\" is "
                                     f"never a vote")
        return report
    return _against(verifier, report, against,
                    f"your answer {head_tail(report.answer, 200)!r} does not agree with {against}",
                    "find which is right with another command that reads the inputs another "
                    "way, then give the result the goal asks for")


def _against(verifier: Verifier, report: Law0Report, why: str, what_was_wrong: str,
             what_to_do: str) -> Law0Report:
    """An earlier round's check contradicts the result (`why`): never verified, and not done
    where this round's agreement is no evidence or no check of this round could confirm it."""
    derived = verifier.derived
    if report.kind == "verified" or (derived is not None and derived.available and
                                     not report.void):
        report.kind = "unverified"
        report.unverified.append(why)
        return report
    report.kind = "failed"
    report.disagreement = True
    report.evidence = f"{why}; no check of this round confirms it"
    report.what_was_wrong = what_was_wrong
    report.what_to_do = what_to_do
    return report


def stands_by(self: Verifier, report: Law0Report,
              current: Optional[list[ToolCallRecord]]) -> Law0Report:
    """One check against an executor that stands by its answer. An answer the first check
    contradicted, derived again by this attempt's own commands after a correction showed
    the executor that check's output, is a second derivation against one: neither refutes
    the other, and without a third every later attempt would fail on the first check's
    word (dev biggest-spender: the right name twice, by two programs, against one wrong
    running total). A derivation in the other form decides: if it derives the answer, the
    result is done but unverified — the checks disagree, and "verified" is never a vote;
    if not, the failure stands, with both checks."""
    first = self.derived
    if report.kind != "failed" or not report.disagreement or first is None or \
            not first.available or first.output_file or first.effects is not None or \
            self.shown or ev.is_absence(first.output) or ev.is_absence(report.answer) or \
            ev.agree(report.answer, first.output, goal=self.goal).agree:
        return report
    again = any(ev.agree(report.answer, a, goal=self.goal).agree for a in self.contradicted)
    self.contradicted.append(report.answer)
    check_cmd = _norm_cmd(first.command)
    own = [out for _, out in _outputs([r for r in (current or []) if r.tool == "shell"
                                       and check_cmd not in _norm_cmd(r.target)])]
    if not again or not any(ev.agree(report.answer, out, goal=self.goal).agree
                            for out in own):
        return report
    second = self.derive_other(first)
    if not second.available:
        return report
    self.shown.append(second)
    printed = head_tail(second.output.strip(), 300) or "(nothing)"
    report.checks.append(f"second independent check `{second.label}` printed: {printed}")
    if ev.is_absence(second.output) or \
            not ev.agree(report.answer, second.output, goal=self.goal).agree or \
            ev.agree(first.output, second.output, goal=self.goal).agree:
        report.evidence += f"; a second check in the other form printed: {printed}"
        return report
    why = (f"the checks disagree: the first (`{head_tail(first.label, 120)}`) printed "
           f"{head_tail(first.output.strip(), 200)}; a second in the other form "
           f"(`{head_tail(second.label, 120)}`) derives the answer, which the executor "
           f"derived again after seeing the first")
    return Law0Report("unverified", why, report.checks, unverified=[why],
                      answer=report.answer)


def _apply_file(verifier: Verifier, report: Law0Report) -> Law0Report:
    """A file the goal makes whose content an earlier round's check of the same file on the
    same inputs contradicts: never verified, and not done when no check of this round confirms
    it (dev failed-login-days at 1d14656: round 2 wrote again the timestamps round 1's check had
    refuted, its own check crashed, and it ended "done, but not verified", wrong)."""
    derived = verifier.derived
    file = derived.output_file if derived is not None else ""
    if not file:                  # the check named none: the one file the goal makes, if made
        made = [p for p in referents.to_make(verifier.subtask.referents)
                if os.path.isfile(os.path.join(verifier.workspace, p))]
        file = made[0] if len(made) == 1 else ""
    content = _read(os.path.join(verifier.workspace, file)) if file else ""
    if not content.strip():
        return report
    earlier = next((c for c in _earlier_checks(verifier) if c.get("file") == file and not
                    ev.same_content(content, str(c.get("output") or ""))), None)
    if earlier is None:
        return report
    expects = str(earlier.get("output") or "")
    why = (f"{file} does not hold what an independent check an earlier round of this task ran "
           f"(`{head_tail(str(earlier.get('label') or ''), 120)}`) derived")
    return _against(verifier, report, why, f"{file} contains:\n{head_tail(content, 300)}\nbut "
                    f"{why}, which expects:\n{head_tail(expects, 300)}",
                    f"find which is right with another command that reads the inputs another "
                    f"way, then write {file}")
