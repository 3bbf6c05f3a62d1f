"""k-of-N on R4a's checker (`Verifier._confirm`): "verified" needs a second derivation in the
other form that agrees; what a second check that crashed, derived nothing, or derived something
else means. Functions of the Verifier (`self`), kept apart to keep verifier.py readable."""
from __future__ import annotations

import contextvars
import json
import os
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Optional

from protocol.messages import ToolCallRecord

from services.roles import independence, sqlcheck
from services.runtime.llm import RESAMPLE_TEMPERATURE
from services.safety import evidence as ev, record, referents, sandbox
from services.safety.tools import head_tail
from .law0report import ANSWER_AGAIN, Law0Report

if TYPE_CHECKING:
    from .verifier import DerivedCheck


def crashed(check: "DerivedCheck") -> bool:
    """It was proposed and could not run (a broken program, a failed command), the budget
    aside: asked the same question at temperature 0 it would crash again, so it is asked once
    more, freer."""
    return not check.available and bool(check.command) and "budget" not in check.why_unavailable


AHEAD_MIN_MS = 50.0


def derive_ahead(self) -> None:
    """Start the first derivation on a thread of its own, beside R4a's scoring call. It reads
    only the goal and the copy of the workspace taken before the work (`before_dir`), never the
    result, so it need not wait for the scoring: on an attempt that passes it, the two model
    calls overlap instead of following each other (a model round trip off every checked
    subtask). Once per subtask; not without the before-copy (the live workspace would then be
    read while the work may still change it), nor on the bundled model, which answers one
    request at a time, nor where a model call takes less than AHEAD_MIN_MS (the endpoint's last
    call in this process, the executor's): a second request at once needs a second connection
    and thread, which cost more than the overlap saves on a call of a few milliseconds (the
    pipeline benchmark's validation stage, median of 6 runs, 10.9 → 13.2 ms). What it costs:
    on a subtask none of whose attempts reaches the check, one derivation call made for
    nothing."""
    recent = getattr(self.llm, "recent_latency_ms", None)
    if self.derived is not None or self.ahead is not None or not self.before_dir or \
            recent is None or getattr(self.llm, "local", False) or \
            (recent() or 0.0) < AHEAD_MIN_MS:
        return
    ahead: Future = Future()

    def derive() -> None:
        try:
            ahead.set_result(self.derive_as(None))
        except BaseException as exc:  # noqa: BLE001 - the check derives it again itself
            ahead.set_exception(exc)
    self.ahead = ahead
    # the message's trace context goes along (the derivation's model call is a span of it)
    threading.Thread(target=contextvars.copy_context().run, args=(derive,), daemon=True,
                     name="derive-ahead").start()


def _first_derivation(self) -> "DerivedCheck":
    """The derivation `derive_ahead` started (waited for), else one made now."""
    ahead, self.ahead = self.ahead, None
    if ahead is not None:
        try:
            return ahead.result()
        except Exception:  # noqa: BLE001 - derived again below, as without it
            pass
    return self.derive_as(None)


def first_check(self) -> "DerivedCheck":
    """The first derivation, in the form that suits the goal. When it cannot run (a broken
    program, a command that failed) it is shown its reply and error and asked once more in its
    form; if that fails too, one in the other form stands in: a check that crashed is no check."""
    first = _first_derivation(self)
    if not crashed(first):
        return first
    again = repaired(self, first, lambda: self.derive_as(first.program, query=first.sql,
                                                         file=first.output_file, repair=first))
    other = again if again.available else self.derive_other(first)
    return other if other.available else first


def mended(self, first: "DerivedCheck", other: "DerivedCheck") -> "DerivedCheck":
    """`other`, the check in the other form than `first`; if it crashed, the one it gives when
    shown its own reply and error (`derivation.repair_note`) — asked the same question at
    temperature 0 it would crash again — when that one runs."""
    if not crashed(other):
        return other
    again = repaired(self, other, lambda: self.derive_other(first, repair=other))
    return again if again.available else other


def repaired(self, broken: "DerivedCheck", ask: Callable[[], "DerivedCheck"]) -> "DerivedCheck":
    """The repair of a crashed check, asked once per crash. The same question asked again at
    temperature 0 gets the same crashed reply without a model call (the k-of-N step asks the
    first form again after a stand-in), and its repair was asked already: the answer is the
    same, not another call (dev extract-warnings at 65612b9: one crashed program was repaired
    twice, both times verbatim, and the executor's retry found the task's budget spent)."""
    key = (broken.reply, broken.error, broken.why_unavailable)
    if key not in self.repairs:
        self.repairs[key] = ask()
    return self.repairs[key]


def confirm(self, report: Law0Report, records: list[ToolCallRecord], file: str, *,
             independent_of: bool = False) -> None:
    """k-of-N on the checker: one derivation that agrees is one model's opinion, and a
    checker that writes the same program as the executor shares its mistakes. "verified"
    stands only if a second derivation in the other form (shell COMMAND vs PYTHON program)
    agrees as well. One that crashed is shown its error and asked once more. One that could
    not settle it (printed nothing, or agreed only by the executor's method) gives way to one
    more sample in the first form, at a temperature that lets it take another way, if it reads
    the data otherwise than the first check; one that derived something else is a
    contradiction, and no third sample outvotes it. With `independent_of`, the first check
    agreed using the executor's own method (or after the executor saw its output): then only a
    confirming derivation of another method than the executor's counts, and it turns the result
    verified; a contradicting one that is independent itself fails it. Otherwise the result is
    done but unverified, saying what the checks printed."""
    first = self.derived
    assert first is not None
    valueless = independent_of and not file and valueless_first(self, report)
    if sandbox.status(self.settings).mode != "bubblewrap":
        if valueless:
            unsupported(report, "no second check in another form (a checking program needs "
                                "the tool sandbox)")
        elif not independent_of:
            report.kind = "unverified"
            report.unverified.append("no second check in another form (a checking program "
                                     "needs the tool sandbox)")
        return
    shell = [r.target for r in records if r.tool == "shell"]
    second = mended(self, first, self.derive_other(first))   # a check that crashed is none
    doubt = confirms(self, report, records, file, second, shell, independent_of)
    if doubt and valueless:
        unsupported(report, doubt)
        return
    against = second if doubt and second.disagreed else None
    if doubt and against is None:
        # k-of-N: a second check that could not settle it (it derived nothing, or agreed
        # only by the executor's method) gives way to one more sample in the first form,
        # freer; it counts only if it reads the data otherwise than the first check (the
        # same reading repeats the same mistake). A second check that derived something
        # else is a contradiction no majority outvotes: "verified" is never a vote.
        third = self.derive_as(first.program, RESAMPLE_TEMPERATURE, query=first.sql,
                               file=first.output_file)
        same = third.available and (
            _norm_cmd(third.command) == _norm_cmd(first.command)
            or independence.same_program(third.command, first.command) or independence.doubts(
                "the resample", third.command, [first.command],
                root=self.before_dir or self.workspace, names=self.names,
                files=self.before, verified=True))
        if same:
            doubt += "; a resample in the first form read the data the first check's way"
        else:
            again = confirms(self, report, records, file, third, shell, independent_of)
            doubt = f"{doubt}; {again}" if again else ""
    def independent(check: DerivedCheck) -> bool:      # asked only where it decides
        return not independence.doubts("the check", check.command, shell,
                                       root=self.before_dir or self.workspace, names=self.names,
                                       files=self.before, verified=True)
    if doubt and against is not None and (report.void or independent_of and independent(against)):
        # the agreement was no evidence — the executor's own method, or its fields read its
        # way on data that can mislead so — and the one independent check contradicts the
        # result: contradicted is not done (and the correction shows the executor its output;
        # dev biggest-spender at 59d3618 ended "done" with the largest single order's customer
        # after a GROUP BY query printed the largest total's)
        self.shown.append(against)
        self.refuted.append(first.output)
        shown = head_tail(against.output.strip(), 300)
        report.kind = "failed"
        report.disagreement = True
        report.evidence = (f"the only independent check (`{against.label}`) disagrees "
                           f"(printed: {shown}); the agreeing check was no evidence "
                           f"({report.doubts[0]})")
        report.what_was_wrong = (f"your result does not agree with an independent check: "
                                 f"`{against.label}` printed: {shown}")
        report.what_to_do = ("find which is right with another command that reads the "
                             "inputs another way, then give the result the goal asks for")
        return
    if not doubt and (valueless or independent_of and misses_records(self, first)):
        # one check confirmed it, and the first supports nothing (it printed no value, or it
        # leaves records out): a resample in the first form must confirm as well — "verified"
        # is two derivations that agree, as ever; without it, done but unverified
        third = self.derive_as(first.program, RESAMPLE_TEMPERATURE, query=first.sql,
                               file=first.output_file)
        doubt = confirms(self, report, records, file, third, shell, independent_of)
    if not doubt:
        if independent_of:
            report.kind = "verified"
            report.unverified = [u for u in report.unverified if u not in report.doubts]
        return
    report.kind = "unverified"
    report.unverified.append(doubt)


def reread_shown(self, report: Law0Report, records: list[ToolCallRecord], refs: list,
                 root: str) -> None:
    """The answer repeats the value a correction showed the executor, which an independent
    check in the other form derived when it refuted the first check. That check cannot confirm
    its own output and the copy is no derivation; one more sample in the first form, freer,
    that reads the data otherwise than the refuted check and derives the same value is the
    second derivation "verified" needs — two forms that agree, as ever (dev count-error-entries:
    `'ERROR' in line` counted 9, a query on the level column 5, the executor copied the 5 and
    it stayed done but unverified). A question's answer only; a file is judged whole."""
    first = self.derived
    if report.kind != "unverified" or first is None or first.effects is not None or \
            first.output_file or not any(
                s.output.strip() and ev.agree(report.answer, s.output, goal=self.goal).agree
                for s in self.shown):
        return
    third = self.derive_as(first.program, RESAMPLE_TEMPERATURE, query=first.sql)
    if not third.available or _norm_cmd(third.command) == _norm_cmd(first.command) or \
            referents.misread(refs, [third.command], goal=self.goal, root=root):
        return
    shell = [r.target for r in records if r.tool == "shell"]
    doubt = confirms(self, report, records, "", third, shell, True)
    if doubt:
        report.unverified.append(doubt)
        return
    report.kind = "verified"
    report.unverified = []
    report.evidence = (f"the answer is what an independent check in the other form derived, and "
                       f"one more derivation in the first form (`{head_tail(third.label, 120)}`), "
                       f"reading the data otherwise than the check it refuted, derives it too")


def misses_records(self, check: "DerivedCheck") -> str:
    """Why the check's program leaves records out (`independence.misses_spellings` on the data
    it read), read once per check: the first check is asked when it is scored and again when
    the other form confirms."""
    if check.missed is None:
        check.missed = independence.misses_spellings(check.command,
                                                     self.before_dir or self.workspace)
    return check.missed


def valueless_first(self, report: Law0Report) -> bool:
    """The first check printed no value (nothing, 0) for an answer: not a contradiction, but no
    support either — the answer stands only if the other form confirms it (and a resample of
    the first form as well)."""
    first = self.derived
    return first is not None and first.effects is None and not first.output_file and \
        ev.agree(report.answer, first.output, goal=self.goal).void


def unsupported(report: Law0Report, why: str) -> None:
    """No check supports the answer: the first printed no value and the other form did not
    confirm it. A failed attempt, as when the first check's 0 refuted it — never "done" on
    no evidence at all."""
    report.kind = "failed"
    report.disagreement = True
    report.evidence = f"no check confirms the answer: {report.doubts[0]}; {why}"
    report.what_was_wrong = (f"no independent check confirms your answer "
                             f"{head_tail(report.answer, 200)!r}: {report.doubts[0]}; {why}")
    report.what_to_do = ANSWER_AGAIN


def confirms(self, report: Law0Report, records: list[ToolCallRecord], file: str,
              check: DerivedCheck, shell: list[str], independent_of: bool) -> str:
    """'' when the derivation `check` confirms the result (and, with `independent_of`, was
    not the executor's own method); else why not."""
    form = _form(check)
    if not check.available:
        return f"a second independent check in another form: {check.why_unavailable}"
    if check.recalled:
        return (f"a second independent check in another form (`{check.label}`) only restates "
                f"what the world model recorded in an earlier session: a reference, no evidence")
    shown = head_tail(check.output.strip(), 200) or "(nothing)"
    first = self.derived
    same_void, content, rows = False, "", None
    # it makes the slip code rejects in the work, or it answered over every record, not the
    # ones the goal singles out: no check, and no contradiction either
    slip = slipped(self, check, file)
    why = slip.message if slip is not None else "; ".join(referents.unread(
        referents.coerce(self.subtask.referents), [check.command, check.query], self.goal)) \
        or misses_records(self, check)
    if why:
        return f"a second independent check in another form (`{check.label}`) is no check: {why}"
    target = file or (check.output_file if first.effects is not None else "")
    if check.sql and target and sqlcheck.foreign_layout(check.output, target, check.query):
        return (f"a second independent check in another form (`{check.label}`) is no check "
                f"of {target}: a query prints comma-separated rows, and {target} is no "
                f"comma-separated file")
    if first.effects is not None and check.effects is None and check.output_file and \
            check.output.strip():
        # a change goal's second check that derived the one file it changes (a query's
        # INSERT prints the table as the file must read): that file as it derived it, every
        # other file as it was
        ok = _only_changed(self, check.output_file, check)
    elif first.effects is not None:
        ok = check.effects is not None and \
            _state(check.effects) == _state(ev.snapshot(self.workspace))
    elif file:
        content = _read(os.path.join(self.workspace, file))
        # a query prints rows: after a header of its columns, the first check vouched for
        rows = sqlcheck.rows_after_header(content, check.query) if check.sql else None
        ok = bool(check.output.strip()) and any(
            ev.same_content(c, check.output, numbers=check.sql) for c in (content, rows) if c)
    else:
        verdict = ev.agree(report.answer, check.output, goal=self.goal,
                           data=[o for _, o in _outputs(records)] + [first.output, check.output])
        ok = not ev.is_absence(check.output) and verdict.agree
        # no value where the answer states none either (0 and 0): no evidence, no contradiction
        stated = ev.Corpus.of([report.answer])
        same_void = verdict.void and all(v in stated for v in ev.answer_values(check.output))
    report.checks.append(f"second independent check ({form}) `{check.label}` "
                         f"printed: {shown}")
    # derived something of the result's shape and disagrees: for a change goal, a copy it
    # changed otherwise; for an answer, as many values (a list of ids printed for a count is
    # a check that went astray, not a contradiction)
    check.disagreed = not ok and not same_void and (
        (check.effects is not None or bool(check.output_file and check.output.strip()))
        if first.effects is not None else
        not ev.is_absence(check.output) and (bool(file) or len(ev.answer_values(
            check.output)) == len(ev.answer_values(report.answer))))
    if not ok:
        return (f"a second independent check in another form (`{check.label}`) does not "
                f"agree; it printed: {shown}")
    if independent_of:
        # both ways: a command looking for the program's value reads the data its way too
        echo = [d for a, b in [(check.command, shell)] + [(c, [check.command]) for c in shell]
                for d in independence.doubts("the result", a, b,
                                             root=self.before_dir or self.workspace,
                                             names=self.names, files=self.before,
                                             verified=True)]
        if echo:
            return f"the second check agrees, but not independently: {echo[0]}"
        if check.sql and file and rows is None and len(content.splitlines()) > 1 and \
                not sqlcheck.is_change(check.query):
            # a query prints rows, never a header line: alone it cannot tell whether the
            # rows of a file should follow one (dev name-email-copy: the executor copied a
            # shown check that dropped the header the goal keeps, and a query "confirmed" it)
            return (f"a query prints rows only: whether {file} should begin with a header "
                    f"line, no check that could print one confirmed")
    if self.derived is not None and _form(self.derived) == form:
        # the k-of-N resample: the first check's form, reading the data otherwise
        report.evidence += (f"; one more derivation in the first check's form, reading the "
                            f"data otherwise, agrees (`{check.label}`)")
    else:
        report.evidence += f"; a second check in another form agrees (`{check.label}`)"
    return ""


def _glued(self, file: str, derived: DerivedCheck) -> Optional[record.Glued]:
    """The slip of appending onto a last line without a newline, in the content `derived`
    derived for `file` (from the file as it was before the work)."""
    try:
        with open(os.path.join(self.before_dir or self.workspace, file), "rb") as fh:
            old = fh.read(1 << 20)
    except OSError:
        return None
    return record.glued_content(file, old, derived.output.encode("utf-8", "replace"))


def slipped(self, check: DerivedCheck, file: str = "") -> Optional[record.Glued]:
    """The slip code rejects in the work, made by a check: on the copy it changed, or in the
    content it derived for `file` (its own file when none is given)."""
    target = file or check.output_file
    return check.slips[0] if check.slips else \
        _glued(self, target, check) if target and check.output.strip() else None


def _only_changed(self, file: str, check: DerivedCheck) -> bool:
    """The workspace is the before-copy with `file` holding what `check` derived for it."""
    real = {p: v for p, v in _state(ev.snapshot(self.workspace)).items() if p != file}
    was = {p: v for p, v in _state(self.before).items() if p != file}
    return real == was and ev.same_content(_read(os.path.join(self.workspace, file)),
                                           check.output, numbers=check.sql)


def _state(files: dict[str, ev.FileState]) -> dict[str, Any]:
    """Paths and contents (the hash; the size where the file was too big to hash): what two
    copies of a workspace must share, whatever their mtimes."""
    return {p: f.digest or f.size for p, f in files.items()}


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return ""


def _written(path: str, before: str) -> bool:
    """A check wrote `path` on its scratch copy: it is there and was not, or its time changed
    (the copy keeps each file's time). A file an earlier round left, which the check did not
    touch, is no derivation (dev avg-200-latency: a check that matched no line "derived" the
    wrong 10.0 an earlier round had written, and agreed with it)."""
    try:
        return os.path.isfile(path) and (not os.path.isfile(before) or
                                         os.stat(path).st_mtime_ns != os.stat(before).st_mtime_ns)
    except OSError:
        return False


def _outputs(records: list[ToolCallRecord]) -> list[tuple[str, str]]:
    """(what the call spelt out, what it printed) of the successful calls."""
    return [(f"{r.target} {json.dumps(r.arguments, ensure_ascii=False)}", r.output or "")
            for r in records if not r.error or ev.no_match(r.error)]


def _form(check: "DerivedCheck") -> str:
    return "query" if check.sql else "program" if check.program else "command"


def _norm_cmd(command: str) -> str:
    return " ".join((command or "").split())
