"""Law 0 on what the workspace must hold: a file goal's file against the check's derivation
(`check_file`, with a stand-in check when the first derived nothing) and a change goal's
workspace against the copy the check changed (`check_effects`). Functions of the Verifier
(`self`), kept apart to keep verifier.py readable."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Optional

from protocol.messages import ToolCallRecord

from services.safety import evidence as ev, record
from services.safety.datafiles import python_reads
from services.safety.pyprograms import constant_writes
from services.safety.tools import head_tail
from . import rounds, sqlcheck
from .confirm import _glued, _outputs, _state, confirms, mended, slipped
from .law0report import SILENT_WRITE, Law0Report

if TYPE_CHECKING:
    from .verifier import DerivedCheck


def check_file(self, file: str, derived: DerivedCheck, changes: ev.Changes,
                checks: list[str], unexpected: list[str], answer: str,
                revealed: bool, records: list[ToolCallRecord]) -> Law0Report:
    path = os.path.realpath(os.path.join(self.workspace, file))
    if not os.path.isfile(path):
        printed = next((r.output.strip() for r in reversed(records)
                        if not r.error and not ev.is_absence(r.output)), "")
        # the small model often prints the result it was asked to write (then `touch`es
        # the file when told it is missing): name the write it left out
        return Law0Report(
            "failed", f"{file} does not exist in the workspace ({changes.describe()})",
            checks, what_was_wrong=f"the file {file} does not exist in the workspace" + (
                f"; your last command printed {head_tail(printed, 120)!r} but wrote no file"
                if printed else ""),
            what_to_do=f"write the result into {file} with a tool call (in a PYTHON: program, "
                       f"open('{file}', 'w').write(...) instead of print), then show it with "
                       f"cat", answer=answer)
    try:
        with open(path, "rb") as fh:
            content = fh.read(1 << 20).decode("utf-8", "replace")
    except OSError as exc:
        return Law0Report("unverified", f"{file} could not be read: {exc}", checks,
                          unverified=[f"{file} could not be read: {exc}"], answer=answer)
    checks.append(f"{file}: {len(content.splitlines())} line(s), "
                  f"{'changed' if file in changes.touched else 'not changed'} by this subtask")
    if file not in changes.touched and file in rounds.rejected_files(self):
        # not the user's file: a failed round of this task wrote it, and this one did nothing
        # to it — work not done, whatever this round's check can or cannot derive
        why = f"{file} holds what an earlier, rejected round of this task wrote"
        return Law0Report("failed", f"{why}; this attempt did not write it", checks,
                          what_was_wrong=f"{why}, and your attempt did not write it",
                          what_to_do=f"write {file} with a tool call that does what the goal "
                                     f"asks, then show it with cat", answer=answer)
    spelt = own_words(self, file, content, records) if file in changes.touched else None
    if spelt is not None:
        why = (f"{file} holds only text the program that wrote it spelt out ({spelt[0]!r}), "
               f"none of what it read from {', '.join(spelt[1])}")
        return Law0Report(
            "failed", f"{why}: the work computed nothing", checks,
            what_was_wrong=f"{why}: your program's branch for 'nothing found' ran, so the "
                           f"records it looked for were not matched",
            what_to_do=f"print a few records of {', '.join(spelt[1])} split into fields, find "
                       f"the fields the goal names, then compute the result from them and "
                       f"write it into {file}", answer=answer)
    if not derived.available:
        if idle(self, changes):
            return untouched(file, checks, answer)
        return Law0Report("unverified", f"{file} exists; {derived.why_unavailable}", checks,
                          unverified=[f"the content of {file}: {derived.why_unavailable}"],
                          answer=answer)
    if content.strip() and not derived.output.strip():
        derived = stand_in(self, derived, checks, "derived nothing") or derived
    slip = _glued(self, file, derived)
    if slip is not None:
        # the check joined its text to the file's last line, the slip code rejects in the
        # work (record.glued): no check of work that did not make it — one in the other form
        # stands in for it, if it does not make the same slip
        other = stand_in(self, derived, checks, f"joined a line ({slip.message})",
                         lambda c: _glued(self, file, c) is None)
        if other is None:
            why = f"the independent check (`{derived.label}`) is no check: {slip.message}"
            return Law0Report("unverified", why, checks, unverified=[why], answer=answer)
        derived = other
    if derived.sql and sqlcheck.foreign_layout(derived.output, file, derived.query):
        layout = f"printed comma-separated rows, and {file} is no comma-separated file"
        other = stand_in(self, derived, checks, layout, lambda c: not c.sql)
        if other is None:
            why = f"the independent check (`{derived.label}`) is no check: it {layout}"
            return Law0Report("unverified", why, checks, unverified=[why], answer=answer)
        derived = other
    expected = derived.output
    checks.append(f"independent check `{derived.label}` derived "
                  f"{len(expected.splitlines())} line(s)")
    if not content.strip() and not expected.strip():
        # Nothing agreeing with nothing: the command that wrote the file most likely
        # computed nothing. One more attempt (then "unverified", as for a disagreement).
        return Law0Report(
            "failed", f"{file} is empty and the independent check derived nothing",
            checks, disagreement=True,
            what_was_wrong=f"{file} is empty: the command that wrote it produced nothing",
            what_to_do=f"first run a command that prints what {file} must hold and read "
                       f"its output; then write exactly that into {file}", answer=answer)
    if content.strip() and not expected.strip():
        # a check that derived nothing has not contradicted a file that holds something (the
        # 1.5B checker's awk often prints nothing); a retry on it wrecked right files
        if idle(self, changes):
            return untouched(file, checks, answer)
        return Law0Report(
            "unverified", f"{file} holds {len(content.splitlines())} line(s); the independent "
            f"check (`{derived.label}`) derived nothing", checks,
            unverified=[f"the content of {file}: the independent check derived nothing to "
                        f"compare it with"], answer=answer)
    # the first check may print the name of the file it read with the value (`wc -l f`); the
    # second (confirm.py) must then derive the content exactly, so a name the goal wanted in
    # the file cannot be lost by both
    if not ev.same_content(content, expected, numbers=derived.sql, names=self.names):
        return tied(self, derived, records, file, Law0Report(
            "failed", f"{file} does not hold what an independent check derived from the "
            f"inputs (`{derived.label}`)", checks, disagreement=True,
            what_was_wrong=f"{file} contains:\n{head_tail(content, 300)}\nbut an independent "
                           f"check (`{derived.label}`) expects:\n{head_tail(expected, 300)}",
            what_to_do=f"rewrite {file} so it holds exactly the right content, then cat it",
            answer=answer))
    spaces = not ev.same_content(content, expected, exact=True, numbers=derived.sql,
                                 names=self.names)
    kind = "unverified" if unexpected or revealed or spaces else "verified"
    if raw(answer, records) or not ev.answer_values(answer) or \
            ev.unsupported_values(answer, _outputs(records), self.goal):
        # the answer to a file goal is the file; a value from nowhere is not repeated
        answer = f"{file} written ({len(content.splitlines())} line(s))"
    report = Law0Report(kind, f"{file} holds exactly what an independent check derived from "
                        f"the inputs (`{derived.label}`)", checks, answer=answer)
    if unexpected:
        report.unverified.append(f"files changed that the goal did not ask for: "
                                 f"{', '.join(unexpected[:10])}")
    if revealed:
        void(report, f"{file} matches the independent check only after the executor was "
                      f"shown its output")
    if spaces:
        # which of the two is right about spaces at line ends, code cannot tell
        report.unverified.append(f"{file} matches the independent check only when spaces "
                                 f"at the ends of lines are ignored")
    self._mark_echo(report, derived, records, file)
    return report


def idle(self, changes: ev.Changes) -> bool:
    """The goal asks for a change and the work changed nothing."""
    return ev.asks_to_change(self.goal) and not (changes.touched or changes.deleted)


def own_words(self, file: str, content: str,
              records: list[ToolCallRecord]) -> Optional[tuple[str, list[str]]]:
    """(the text, the files read) when `file` holds nothing but a text that a program of the
    work wrote whole as a constant while it read other files, and the goal does not give that
    text: no value read flowed into the result, the program's own message did (dev
    avg-200-latency: a parse that matched no line wrote 'No requests with status 200 found' for
    an average the log holds, and "done, but not verified" rested on it). None otherwise."""
    text = content.strip()
    if not text or set(ev.tokens(text)) <= set(ev.tokens(self.goal)):
        return None
    target = os.path.realpath(os.path.join(self.workspace, file))
    for r in records:
        program = None if r.error else ev.python_program(str(r.arguments.get("command", "")))
        if program is None or text not in {c.strip() for c in constant_writes(program)}:
            continue
        read = sorted(f for f in (python_reads(program) or ((), ()))[1]
                      if os.path.realpath(os.path.join(self.workspace, f)) != target)
        if read and not set(ev.tokens(text)) <= _words_of(self.workspace, read):
            return text, read
    return None


def _words_of(root: str, files: list[str]) -> set[str]:
    """The value tokens of the readable files among `files` (a text copied from the data, typed
    out rather than read, is still the data's)."""
    words: set[str] = set()
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as fh:
                words.update(ev.tokens(fh.read(1 << 20).decode("utf-8", "replace")))
        except OSError:
            continue
    return words


def untouched(file: str, checks: list[str], answer: str) -> Law0Report:
    """A file goal whose work changed nothing, and no check says the file already holds what
    the goal asks: "done" would rest on nothing (dev root-log-level: a replace that matched no
    line left the file as it was, and a crashed check made it "done, but not verified")."""
    why = f"nothing in the workspace changed: {file} is as it was before the work"
    return Law0Report("failed", f"{why}, and no check could confirm that it already holds what "
                      f"the goal asks", checks, what_was_wrong=why, answer=answer,
                      what_to_do=f"make the change the goal asks for in {file} with a tool call, "
                                 f"then show it with cat")


def stand_in(self, derived: DerivedCheck, checks: list[str], failing: str,
             usable: Callable[[DerivedCheck], bool] = lambda c: True) -> Optional[DerivedCheck]:
    """A file check that checked nothing — it derived nothing (the 1.5B checker's awk often
    prints nothing), or made a slip code rejects — gives way to one in the other form, as for a
    check that crashed, if that one derives something `usable`; the k-of-N step then counts it
    as the first check. None when there is no such one."""
    other = mended(self, derived, self.derive_other(derived))
    if not (other.available and (other.output.strip() or other.effects is not None) and
            usable(other)):
        return None
    checks.append(f"independent check `{derived.label}` {failing}; "
                  f"`{other.label}` stands in for it")
    self.derived = other
    return other


def unslipped(self, derived: DerivedCheck, checks: list[str]) -> DerivedCheck:
    """A change goal's check whose copy shows the slip code rejects in the work (an append
    joined to a last line with no newline, `record.glued`) is no check of work that did not
    make it (dev append-user-row at 65612b9: the check's program appended onto the last line,
    and a right file failed against it until the task was abandoned with the row in place).
    One in the other form stands in — a copy it changed, or the content it derived for the
    file — if it does not slip too; else no check: done, but not verified. Any other check is
    returned as it is."""
    if not (derived.available and derived.slips):
        return derived
    said = "; ".join(g.message for g in derived.slips)
    other = stand_in(self, derived, checks, f"joined a line ({said})",
                     lambda c: slipped(self, c) is None)
    if other is not None:
        return other
    derived.available = False
    derived.why_unavailable = f"the independent check (`{derived.label}`) is no check: {said}"
    return derived


def check_effects(self, derived: DerivedCheck, after: dict[str, ev.FileState],
                   changes: ev.Changes, checks: list[str], answer: str, revealed: bool,
                   records: list[ToolCallRecord]) -> Law0Report:
    """The workspace against the scratch copy the check's own command changed: the same
    files with the same contents, nothing more and nothing less."""
    real, want = _state(after), _state(derived.effects or {})
    missing = sorted(set(want) - set(real))
    extra = sorted(set(real) - set(want))
    differ = sorted(p for p in set(real) & set(want) if real[p] != want[p])
    checks.append(f"independent check `{derived.label}` on a copy of the workspace: "
                  f"{ev.diff(self.before, derived.effects or {}).describe()}")
    if missing or extra or differ:
        wrong = "; ".join(f"{label}: {', '.join(paths[:8])}" for label, paths in (
            ("missing", missing), ("there but should not be", extra),
            ("with other content", differ)) if paths)
        return tied(self, derived, records, "", Law0Report(
            "failed", f"the workspace differs from what an independent check of the goal "
            f"made of a copy of it ({wrong})", checks, disagreement=True,
            what_was_wrong=f"after your commands the workspace has {changes.describe()}; "
                           f"compared with an independent check (`{derived.label}` on a "
                           f"copy), these files are {wrong}",
            what_to_do="make exactly the change the goal asks for, and nothing else; then "
                       "list the files (ls -R)", answer=answer))
    report = Law0Report("verified", f"the workspace is exactly what an independent check "
                        f"of the goal made of a copy of it (`{derived.label}`)", checks,
                        answer=answer)
    if revealed:
        void(report, "the workspace matches the independent check only after the executor "
                      "was shown what it expects")
    self._mark_echo(report, derived, records, "the workspace")
    return report


def tied(self, derived: DerivedCheck, records: list[ToolCallRecord], file: str,
         report: Law0Report) -> Law0Report:
    """A check that made the workspace (or derived the file) otherwise than the work did is one
    model's reading of the goal. If a check in the other form makes exactly what the work made
    (for a file, reading the inputs otherwise than the executor), it contradicts that reading:
    a tie, neither a failure nor a verification — done, but not verified, both named (dev
    rename-txt-to-md: the check renamed chapter1.txt to chapter1..md, and the retry it forced
    ended abandoned with the files right). Not so confirmed: `report`, failed as before."""
    if derived.output.strip() and any(ev.same_content(derived.output, r) for r in self.refuted):
        return report       # it repeats a refuted result: `Verifier._left_method` judges that
    second = mended(self, derived, self.derive_other(derived))
    shell = [r.target for r in records if r.tool == "shell"]
    # a change has few ways to be made (a rename is `mv`): two copies changed alike on their
    # own, from the goal alone, count whatever command made them; a file's content must come
    # from a check that reads the inputs otherwise than the executor did
    if confirms(self, report, records, file, second, shell, independent_of=bool(file)):
        return report
    why = (f"two independent checks disagree: {report.evidence}; one in the other form "
           f"(`{second.label}`) makes exactly what the work made")
    return Law0Report("unverified", why, report.checks, unverified=[why], answer=report.answer)


def void(report: Law0Report, why: str) -> None:
    """An agreement that is no evidence: unverified, and only an independent check can decide
    (`Verifier._confirm`)."""
    report.kind = "unverified"
    report.unverified.append(why)
    report.doubts.append(why)
    report.void = True


def raw(answer: str, records: list[ToolCallRecord]) -> bool:
    """An answer that is nothing but a tool's output (or nothing at all)."""
    text = (answer or "").strip()
    return ev.is_absence(text) or text == SILENT_WRITE or any(
        text == (r.output or "").strip() for r in records)


def scratch_effects(self, check: DerivedCheck, out, root: str, scratch: str, spots: list[str],
                    *, effects: bool, pure: bool) -> None:
    """What a check run on a scratch copy did to it. For a change goal (`effects`) the copy's
    state is the derivation of what the workspace must hold. Otherwise a check that changed
    files and printed nothing did not find nothing: it made the change it took the goal to
    ask for, so the goal is a change goal the wording did not show ("can you flip them so the
    date comes first?"; dev date-first-renames at 713dd00: a rename program's silence
    "confirmed" not_possible) — its copy is the derivation, and every later check of this
    subtask is one of effects too. A command that changed what it was to read for a question
    derived nothing (`pure`)."""
    revealing = ev.is_absence(out.output) and not ev.asks_only(self.goal)
    if not (effects or pure or revealing):
        return                        # a value printed for a question: nothing to snapshot
    after = ev.snapshot(scratch)
    was, now = _state(self.before), _state(after)
    changed = {p for p, v in now.items() if was.get(p) != v} | (set(was) - set(now))
    extra = changed - set(spots)
    if effects or (extra and revealing):
        if changed:
            check.effects = after     # with the slip code rejects in work, if made
            check.slips = record.glued(root, scratch, ev.diff(self.before, after).modified)
            self.change_revealed = True
    elif pure and extra:
        out.error = f"the check changed files it was to read ({', '.join(sorted(extra)[:5])})"
