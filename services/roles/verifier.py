"""R4a's Law 0 half: what code checks before a subtask may be called done.

The Agent-Validator's model verdict is an opinion. This module supplies the evidence:

1. Around the subtask: a snapshot of the workspace (paths, sizes, hashes) and a copy of it as it
   was before the executor ran.
2. One independent re-derivation: a model that sees the goal and the workspace's files but never
   the executor's commands or answer proposes ONE read-only command that prints the answer, or the
   exact content a file the goal asks for must have. Code runs it — only if the Law 1 gate
   classifies it read-only — on the *before* copy, so it derives from the original inputs. For a
   goal about a data file it is a short Python program instead, run in the sandbox on a scratch
   copy of the before-copy (the gate cannot classify a program). For a goal that changes the
   workspace with no one file to check (move, rename, delete), the check's command may change
   files: it runs the same way, and the scratch copy afterwards is the derivation.
3. The checks (`check`): values of the answer that occur in no tool output are invented; a file
   the goal asks for must exist and hold the derived content; a question's answer must agree with
   the derivation; the workspace of a change goal must equal the scratch copy the check changed;
   an executor's "not possible" must agree with a derivation that found nothing; input files
   changed and not asked for are reported.
4. k-of-N (2 of 2) before "verified": a result that agrees with the first derivation is checked
   against a second one in the other form (a shell command where the first was a program, and
   the reverse). Both must agree; one that does not, or cannot run, leaves it unverified.

The result is a `Law0Report`: verified, unverified (what could not be checked), not_possible (with
the evidence), or failed (with a correction that shows both outputs).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from protocol.messages import ExecutionResult, SubTask, ToolCallRecord
from protocol.settings import Settings

from services.roles import calibration, filecheck, independence, rounds, sqlcheck
from services.roles.derivation import (SYSTEM, SYSTEM_PYTHON, clean_path, looks_for_absent,
                                       named_in, names_missing, parse_derivation, repair_note,
                                       restates, strip_redirect, workspace_relative)
from services.roles.programs import PYTHON_PREFIX, names_data_file
from services.runtime import world
from services.runtime.journal import ToolJournal
from services.runtime.llm import LLMError
from services.safety import datafiles, evidence as ev, mcp, overview, record, referents, undo
from .confirm import (RESAMPLE_TEMPERATURE, _norm_cmd, _outputs, _written,
                      confirm, first_check, misses_records, reread_shown, unsupported,
                      valueless_first)
from .filecheck import raw, void
from .law0report import (ANSWER_AGAIN, Law0Report, answer_text, claims_absence, record_flaw,
                         unconfirmed_absence)
from services.safety.law1 import READ_ONLY, classify
from services.safety.tools import Toolbox, ToolOutput, head_tail

log = logging.getLogger("artoo.verifier")

@dataclass
class DerivedCheck:
    output_file: str = ""
    command: str = ""
    output: str = ""
    error: str = ""
    available: bool = False             # a command ran (read-only) and its output is usable
    effects: Optional[dict] = None      # the workspace after the check's command, on a copy
    why_unavailable: str = ""
    program: bool = False               # a PYTHON program (as run), not a shell COMMAND
    query: str = ""                     # an SQL query over the loaded tables (sqlcheck.py)
    recalled: str = ""                  # it restates this fact of the world's projection
    reply: str = ""                     # the checker's reply as written (shown if it crashed)
    named: str = ""                     # its FILE as it named it (output_file: as resolved)
    slips: list = field(default_factory=list)   # record.Glued: lines its copy's appends joined

    @property
    def sql(self) -> bool:
        return bool(self.query)

    @property
    def label(self) -> str:
        """The check as reports show it: a query's SQL, not the loader program that runs it."""
        return f"SQL {self.query}" if self.query else self.command
    disagreed: bool = False             # it ran, derived something, and did not confirm
    missed: Optional[str] = None        # confirm.misses_records, once read


class Verifier:
    """The Law 0 checks of one subtask (all its attempts)."""

    _confirm = confirm              # k-of-N (services/roles/confirm.py)

    def __init__(self, subtask: SubTask, llm, settings: Settings, *, goal: str = ""):
        self.subtask = subtask
        self.llm = llm
        self.settings = settings
        self.workspace = os.path.realpath(settings.workspace)
        self.goal = goal or subtask.goal or subtask.intent
        self.task_id = subtask.parent_task_id
        self.before: dict[str, ev.FileState] = {}
        self.names: set[str] = set()
        self.before_dir: Optional[str] = None
        self.derived: Optional[DerivedCheck] = None
        self.ahead = None                       # the first derivation, begun early (confirm.py)
        self.shown: list[DerivedCheck] = []     # other checks a correction showed the executor
        self.repairs: dict[tuple, DerivedCheck] = {}    # a crashed reply → its repair (once)
        self.refuted: list[str] = []            # first-check outputs a second check refuted
        self.contradicted: list[str] = []       # answers the first check contradicted
        self.changed: list[str] = []            # files the subtask created, changed or deleted
        self.changes: Optional[ev.Changes] = None
        self.change_revealed = False            # a check changed its copy: a change goal
        self.started = False

    # -- around the subtask ---------------------------------------------------------------
    def start(self, journal: Optional[ToolJournal] = None) -> None:
        """Snapshot and copy the workspace before the executor's first tool call. A re-run of the
        subtask after a crash adopts the first run's snapshot and copy (kept in its journal), so
        Law 0 still compares against the workspace before any of the subtask's effects."""
        if self.started:
            return
        self.started = True
        if journal is not None and self._adopt(journal.before()):
            journal.record_before(self._snapshot_record(), self.before_dir or "")
            sweep_stale_copies()
            return
        self.before = ev.snapshot(self.workspace)
        sweep_stale_copies()
        tmp = tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-")
        if ev.copy_tree(self.workspace, tmp):
            self.before_dir = tmp
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if journal is not None:
            journal.record_before(self._snapshot_record(), self.before_dir or "")

    def _snapshot_record(self) -> dict[str, list]:
        return {path: [f.size, f.mtime_ns, f.digest] for path, f in self.before.items()}

    def _adopt(self, rec: Optional[dict]) -> bool:
        """Take over a killed predecessor's before-snapshot and before-copy (renamed to this
        process, so the stale-copy sweep keeps it)."""
        if not rec or not isinstance(rec.get("snapshot"), dict):
            return False
        try:
            self.before = {p: ev.FileState(int(v[0]), int(v[1]), str(v[2]))
                           for p, v in rec["snapshot"].items()}
        except (TypeError, ValueError, IndexError):
            self.before = {}
            return False
        old = rec.get("dir") or ""
        if old and os.path.isdir(old):
            new = tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-")
            try:
                os.rmdir(new)
                os.rename(old, new)
                self.before_dir = new
            except OSError:
                self.before_dir = None
        return True

    def undo_attempt(self) -> list[str]:
        """The files that were there before the subtask and that its work changed or deleted
        are put back from the before-copy: for a goal that only asks, at every check; before a
        retry, so the next attempt edits the original, not the failed result (an append that
        joined the last line, then a right append after it, kept the joined line; a right
        append redone after a wrong check doubled the row); when code proved the last attempt
        wrong, at the subtask's end."""
        ch = self.changes
        if not self.before_dir or ch is None or not (ch.modified or ch.deleted):
            return []
        back = undo.put_back(self.before_dir, self.workspace, ch.modified + ch.deleted)
        self.changed = [p for p in self.changed if p not in back]   # the user's again
        return back

    def left_changed(self) -> list[str]:
        """What the subtask's work leaves made, modified or deleted (after any put back)."""
        ch = ev.diff(self.before, ev.snapshot(self.workspace)) if self.started else None
        return sorted(ch.touched + ch.deleted) if ch else []

    def close(self) -> None:
        if self.before_dir:
            shutil.rmtree(self.before_dir, ignore_errors=True)
            self.before_dir = None

    # -- the independent derivation -------------------------------------------------------
    def prompt(self, tables: str = "") -> str:
        """The checker's view: the goal, and the workspace before the work (or, for a query,
        the tables code loaded from it)."""
        lines = []
        if ev.mentions_time(self.goal):
            lines.append(f"Today's date: {time.strftime('%Y-%m-%d')}")
        lines.append(f"Goal: {self.goal}")
        if " ".join(self.subtask.intent.split()) != " ".join(self.goal.split()):
            lines.append(f"Subtask: {self.subtask.intent}")
        if context := calibration.without_memory(self.subtask.context):   # the world, no method
            lines.append(f"Context: {world.context_text(context, 600, head_tail)}")
        if tables:
            lines.append("Tables (loaded from the files before the work):")
            lines.append(tables)
            return "\n".join(lines)
        lines.append("Workspace files (before the work):")
        lines.append(overview.workspace(self.before_dir or self.workspace, budget=900))
        where = referents.located(self.subtask.referents)
        if where:
            lines.append("Where the goal's names are: " + "; ".join(where))
        return "\n".join(lines)

    def derive(self) -> DerivedCheck:
        """The first derivation (`confirm.first_check`)."""
        if self.derived is None:
            self.derived = first_check(self)
        return self.derived

    def _whole(self) -> dict[str, str]:
        """The small files the goal names, as the executor's prompt showed them: whole."""
        return overview.whole_files(self.before_dir or self.workspace,
                                    referents.named_files(self.subtask.referents))

    def derive_other(self, first: DerivedCheck, *, repair: Optional[DerivedCheck] = None
                     ) -> DerivedCheck:
        """A derivation in another form than `first`: after a query a program, after a program
        a query over the goal's tables (else a shell command), after a shell command a query
        (else a program). It derives what `first` derived: the file `first` named is its file
        too when it names none (a query that prints the count is a derivation of the file
        holding it, not a change goal's check that changed nothing); `repair`: its crash."""
        program, query = (True, False) if first.sql else (not first.program, True)
        return self.derive_as(program, query=query, file=first.output_file, repair=repair)

    def derive_as(self, program: Optional[bool], temperature: Optional[float] = None, *,
                  query: Optional[bool] = None, file: str = "",
                  repair: Optional[DerivedCheck] = None) -> DerivedCheck:
        """One derivation: a PYTHON program (`program`), a shell COMMAND, or (None) the form
        that suits the goal — a program for a goal about a data file. With `query` (by default
        whenever the shell form is asked), an SQL query over the tables of the goal's tabular
        files instead, where there are any (sqlcheck.py). `file`: the output file an earlier
        check of this result named, this one's when its reply names none. `repair`: a crash it
        is shown, and asked freer (at temperature 0 the 1.5B repeated 10 of 11 crashed
        programs verbatim, error shown or not)."""
        self.start()
        check = DerivedCheck()
        if repair is not None and temperature is None:
            temperature = RESAMPLE_TEMPERATURE
        root = self.before_dir or self.workspace
        settings = dataclasses.replace(self.settings, workspace=Path(root))
        toolbox = Toolbox(settings)
        # a program can only be confined by the sandbox; without it, a shell command
        if toolbox.sandbox.mode != "bubblewrap":
            program = False
        elif program is None:
            program = names_data_file(self.goal, root)
        query = not program if query is None else query
        tables = [] if not query or toolbox.sandbox.mode != "bubblewrap" else \
            sqlcheck.tabular_files(self.goal, root, also=[
                w for r in referents.coerce(self.subtask.referents) if r.status == "found"
                and r.kind in ("file", "field") for w in r.where])
        shown = sqlcheck.describe(tables, root) if tables else ""
        try:
            extra = {"temperature": temperature} if temperature is not None else {}
            text = self.llm.complete_text(
                sqlcheck.SYSTEM_SQL if shown else SYSTEM_PYTHON if program else SYSTEM,
                self.prompt(tables=shown) + repair_note(repair, self.before, self._whole()),
                task_id=self.task_id,
                max_tokens=300 if program else 200 if shown else 160, **extra)
            check.reply, reply = text, parse_derivation(text)
            changed = clean_path(workspace_relative(reply.output_file.strip("'\"` "),
                                                    self.workspace)) \
                if ev.asks_to_change(self.goal) else ""     # a file whose table a statement changes
            sql, query_program = sqlcheck.derivation(text, tables, changed) if shown else ("", "")
            reply.command = query_program or reply.command
        except LLMError as exc:
            check.why_unavailable = f"no independent check (LLM error: {exc})"
            return check
        except Exception as exc:  # a client bug must still end in an honest report
            check.why_unavailable = f"no independent check ({type(exc).__name__}: {exc})"
            return check
        check.output_file = clean_path(reply.output_file)
        if check.output_file and not named_in(check.output_file, self.goal):
            check.output_file = ""     # a file the goal does not name is the checker's invention
        before = self.before_dir or self.workspace
        if check.output_file and os.path.isdir(os.path.join(before, check.output_file)):
            check.output_file = ""     # a folder the goal reads from is not a file to write
        if check.output_file and os.path.exists(os.path.join(before, check.output_file)) and \
                not ev.asks_to_change(self.goal):
            check.output_file = ""     # an input a question reads, never a file to rewrite
        check.named = check.output_file or file     # where its own program would write it
        check.output_file = referents.placed(check.named, self.subtask.referents)
        check.command = workspace_relative(strip_redirect(reply.command.strip(), check.named),
                                           self.workspace)
        check.program = check.command.startswith(PYTHON_PREFIX)   # the form it replied in
        check.query = sql
        if not check.command:
            check.why_unavailable = "no independent check (the checker proposed no command)"
            return check
        # a goal that changes the workspace without one file to check (move, rename, delete):
        # the check's command does it on a scratch copy, and the copy is what to compare with
        effects = not check.output_file and toolbox.sandbox.mode == "bubblewrap" and \
            (ev.asks_to_change(self.goal) or self.change_revealed)
        level = READ_ONLY if check.command.startswith(PYTHON_PREFIX) else \
            classify(check.command, workspace=root, cwd=root).level
        if check.command.startswith(PYTHON_PREFIX) or effects or (
                level != READ_ONLY and toolbox.sandbox.mode == "bubblewrap"):
            # a command the gate cannot call read-only (a loop, a write) is confined like a
            # program: in the sandbox, on a scratch copy nothing else sees
            pure = level != READ_ONLY and not effects and \
                not check.command.startswith(PYTHON_PREFIX)
            out = self._run_scratch(check, root, effects=effects, pure=pure)
        elif level != READ_ONLY:
            check.why_unavailable = (f"no independent check (its command `{check.label}` "
                                     f"is {level}, not read-only)")
            return check
        else:
            out = toolbox.run("shell", {"command": check.command})
        if not out.error and record.printed_only_errors(out.output):
            out.error = out.output.strip()[:300]    # `ls -t missing | head -1` exits 0
        check.output = "" if ev.is_absence(out.output) else out.output
        check.error = out.error or ""
        if out.error and names_missing(self, out.error):
            check.output, check.available = "", True    # it named what the workspace lacks
            return check
        if out.law1 or (out.error and not ev.no_match(out.error)):
            # a failed command proves nothing, not even absence (it may have named a wrong file)
            check.why_unavailable = f"no independent check (`{check.label}` failed: {out.error})"
            return check
        # today's date is in the prompt by code, not a belief: echoing it is a derivation
        if restates(check.command, check.output, f"{self.goal} {time.strftime('%Y-%m-%d')}"):
            # a value the world's projection holds as a fact (checked by code in an earlier
            # session) is a reference the work can contradict, never evidence that verifies
            check.recalled = self._recalled(check.output)
            if not check.recalled:
                check.why_unavailable = (f"no independent check (`{check.label}` prints a value "
                                         f"written into it, read from no input, that the goal "
                                         f"does not state: it repeats what the checker was told)")
                return check
        if effects and check.effects is None:
            # a change goal's check is the copy it changed: one that changed nothing (it only
            # printed) derived nothing to compare the workspace with
            check.why_unavailable = (f"no independent check (`{check.label}` changed nothing "
                                     f"on its copy of the workspace)")
            return check
        check.available = True
        return check

    def _left_method(self, report: Law0Report, records: list[ToolCallRecord],
                     current: Optional[list[ToolCallRecord]], revealed: bool) -> Law0Report:
        """A first check that disagrees with this attempt while it derives exactly the result
        of an earlier attempt that an independent check in the other form refuted (the check
        agreed with that result, the other form contradicted both) is no evidence: it repeats
        a refuted result. The result is judged like an agreement that was no evidence — a
        derivation in the other form decides (`confirm`), a correction only if it contradicts
        the result. A first check that derived something else keeps its disagreement."""
        derived = self.derived
        if report.kind != "failed" or not report.disagreement or derived is None or \
                current is None or not derived.output.strip() or not any(
                    ev.same_content(derived.output, r) for r in self.refuted):
            return report
        why = (f"the check (`{head_tail(derived.label, 120)}`) derives the result of an earlier "
               f"attempt, which an independent check in the other form refuted: its "
               f"disagreement is no evidence either way")
        left = Law0Report("unverified", why, report.checks, unverified=[why], doubts=[why],
                          answer=report.answer)
        own = _outputs([r for r in current if r.tool == "shell" and not r.error])
        if revealed and (not derived.output_file and not own or ev.unsupported_values(
                report.answer, own, self.goal)):
            # the answer was copied from what a correction showed: done, and no check of the
            # shown kind can confirm its own output
            left.unverified.append("the answer repeats what a correction showed the executor; "
                                   "this attempt's own commands do not print it")
            left.copied = True
            return left
        left.void = True
        return left

    def _recalled(self, output: str) -> str:
        """The fact lines of the world's projection in this subtask's context that hold every
        value `output` states ("" if none does)."""
        values = set(ev.answer_values(output))
        facts = [f for f in world.projected_facts(self.subtask.context)
                 if values & set(ev.tokens(f))]
        held = set().union(*(set(ev.tokens(f)) for f in facts)) if facts else set()
        return "; ".join(facts)[:300] if values and values <= held else ""

    def _run_scratch(self, check: DerivedCheck, root: str, *, effects: bool,
                     pure: bool = False) -> ToolOutput:
        """A checking program, or a check's command that changes files, in the sandbox on a
        scratch copy of the before-copy (it cannot reach anything else, and the before-copy
        stays as it was). Told to print the file's content, the small model often writes the
        file instead: what it wrote there is its derivation all the same. With `effects`, the
        copy's state afterwards is the derivation of what the workspace must look like."""
        scratch = tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-scratch-")
        try:
            if not ev.copy_tree(root, scratch):
                return Toolbox(dataclasses.replace(self.settings, workspace=Path(root))
                               ).run_confined(check.command, writable=False)
            spots = [p for p in dict.fromkeys((check.output_file, check.named)) if p]
            for spot in spots:
                # the folder of a file the goal makes may be made with it ("as backup/x.txt,
                # the backup folder doesn't exist yet"): a check that writes the file there must
                # not fail for want of it
                os.makedirs(os.path.dirname(os.path.join(scratch, spot)), exist_ok=True)
            out = Toolbox(dataclasses.replace(self.settings, workspace=Path(scratch))
                          ).run_confined(check.command)
            for written, before in ((os.path.join(scratch, p), os.path.join(root, p))
                                    for p in spots):
                if not out.error and _written(written, before):
                    # the file it wrote is its derivation, whatever else it printed (a listing),
                    # also when it wrote what was there (the main job run a second time)
                    with open(written, encoding="utf-8", errors="replace") as fh:
                        out.output = fh.read(1 << 20) or "(no output)"
                    break
            if not out.error:
                filecheck.scratch_effects(self, check, out, root, scratch, spots,
                                          effects=effects, pure=pure)
            return out
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    # -- the checks -------------------------------------------------------------------------
    def check(self, result: ExecutionResult, records: list[ToolCallRecord], *,
              current: Optional[list[ToolCallRecord]] = None,
              revealed: bool = False) -> Law0Report:
        report = self._check(result, records, current=current, revealed=revealed)
        file = self.derived.output_file if self.derived is not None else ""
        if report.kind in ("verified", "unverified") and self.derived is not None and \
                self.derived.recalled:
            # no input holds the value now: what was known is a reference, not evidence
            report.kind = "unverified"
            report.unverified.append(f"it agrees with what the world model recorded in an "
                                     f"earlier session ({self.derived.recalled}); no input of "
                                     f"this session holds that value")
        report = self._left_method(report, records, current, revealed)
        report = rounds.stands_by(self, report, current)   # an answer given again
        # agreement discounted only because the check used the executor's own method: a second
        # check in the other form that is independent of the executor may still confirm it
        echo_only = report.kind == "unverified" and bool(report.doubts) and \
            report.unverified == report.doubts and not (self.derived and self.derived.recalled)
        refs = referents.coerce(self.subtask.referents)
        root = self.before_dir or self.workspace
        if report.kind in ("verified", "unverified"):
            # the work read another thing than the one the goal names: it answered another
            # question, so it is not done (only this attempt's commands: a retry may fix it)
            wrong = referents.misread(refs, [r.target for r in (current or records)],
                                      goal=self.goal, root=root)
            if wrong:
                return Law0Report(
                    "failed", "; ".join(wrong), report.checks, answer=report.answer,
                    what_was_wrong="; ".join(wrong),
                    what_to_do=referents.what_to_do(wrong))
        if report.kind == "verified" or echo_only:
            check = [self.derived.command, self.derived.query] if self.derived else []
            misread = referents.misread(refs, check, goal=self.goal, root=root)
            if misread and echo_only and valueless_first(self, report):
                unsupported(report, "; ".join(misread))    # no check supports it at all
            elif misread:
                # a check that read a near match confirms nothing
                report.kind = "unverified"
                report.unverified += misread
            else:
                self._confirm(report, records, file, independent_of=echo_only)
        elif report.copied:
            reread_shown(self, report, records, refs, root)
        changes = self.changes
        if changes is not None and (changes.touched or changes.deleted) and \
                report.kind != "failed" and raw(report.answer, records) and \
                not ev.asks_only(self.goal) and \
                (ev.asks_to_change(self.goal) or not ev.answer_values(report.answer)):
            # a tool's own words ("[approved by --yes …] (no output)") are no answer to a goal
            # that changed files: say what changed. The value a question's command printed
            # stays the answer, whatever stray file an earlier attempt wrote
            report.answer = f"done: {changes.describe()}"
        report = rounds.apply(self, report)     # what an earlier round's checks derived
        report.answer_stated = bool(ev.answer_values(report.answer)) or bool(self.changed) or (
            bool(file) and os.path.isfile(os.path.join(self.workspace, file)))
        return report

    def _check(self, result: ExecutionResult, records: list[ToolCallRecord], *,
               current: Optional[list[ToolCallRecord]] = None,
               revealed: bool = False) -> Law0Report:
        """Check one attempt's result. `records`: every tool call of the subtask; `current`:
        this attempt's; `revealed`: a correction already showed the executor the independent
        check's output, so agreeing with it is no longer independent — only this attempt's own
        commands (other than the check's) printing the answer make it verified."""
        answer = answer_text(result.output)
        # the small files the goal names, which the executor's prompt showed whole
        outputs = _outputs(records) + [(f"(shown whole) {p}", text)
                                       for p, text in self._whole().items()]
        if revealed:
            # what a correction showed is in the executor's view: a value copied from it is
            # no value from nowhere (agreeing with it is still no evidence: `revealed`)
            outputs += [(c.command, c.output) for c in [self.derived, *self.shown]
                        if c is not None and c.available]
        after = ev.snapshot(self.workspace)
        self.names = set(self.before) | set(after)     # file names, for same-method checks
        changes = self.changes = ev.diff(self.before, after)
        self.changed = changes.touched + changes.deleted
        checks = [f"workspace: {changes.describe()}"]
        if ev.asks_only(self.goal):
            # a question's work damaged an input: the user's data comes back (still reported)
            back = self.undo_attempt()
            if back:
                checks.append(f"put back as before the work (the goal only asks): "
                              f"{', '.join(back[:10])}")
        # folders hold no bytes, so file snapshots do not see an empty one made
        made = sorted(ev.folders(self.workspace) - ev.folders(self.before_dir or self.workspace))
        if made:
            checks.append(f"folders made: {', '.join(made[:10])}")
        claims_none = result.status == "not_possible" or (not ev.answer_values(answer)
                                                          and claims_absence(answer))
        # A file goal's deliverable is the file (checked below, its answer written by code): a
        # stray number in the executor's closing words must not fail work that may be right.
        file_work = bool(changes.touched or changes.deleted) and ev.asks_to_change(self.goal)
        refs = referents.coerce(self.subtask.referents)
        flaw = record_flaw(self.subtask, self.goal, self.workspace, result, answer, records,
                           refs, claims_none=claims_none, file_work=file_work)
        if flaw is None and file_work and self.before_dir and changes.modified:
            joined = record.glued(self.before_dir, self.workspace, changes.modified)
            if joined:
                said = "; ".join(g.message for g in joined)
                commands = [g.command() for g in joined]
                flaw = Law0Report("failed", said, what_was_wrong=said, answer=answer,
                                  what_to_do="; ".join(g.fix() for g in joined),
                                  fix=" && ".join(commands) if all(commands) else "")
        if flaw is not None:
            flaw.checks = checks + flaw.checks
            return flaw
        if not claims_none and not file_work:
            invented = ev.unsupported_values(answer, outputs, self.goal)
            last = (current or records or [None])[-1]
            nothing = last is not None and ev.is_absence(last.output) and \
                (not last.error or ev.no_match(last.error))
            if invented and nothing:
                return Law0Report(
                    "failed", f"the answer states {', '.join(invented[:5])}, but the last "
                    f"command printed nothing", checks,
                    what_was_wrong=f"your last command printed nothing, yet you answered "
                                   f"{', '.join(invented[:5])}",
                    what_to_do="if what the task asks about does not exist, reply NOT POSSIBLE: "
                               "<what does not exist>; otherwise run a command that prints the "
                               "answer", answer=answer)
            if invented:
                return Law0Report(
                    "failed", f"the answer states {', '.join(invented[:5])}, which no tool "
                    f"output of this task shows (a value from nowhere is not evidence)", checks,
                    what_was_wrong=f"your answer states {', '.join(invented[:5])}, which no tool "
                                   f"output shows",
                    what_to_do="run a command whose output shows the answer, and copy the answer "
                               "from that output", answer=answer)
        backed = "" if claims_none or file_work else mcp.backed_by_mcp(answer, current or records,
                                                                        self.goal)
        if backed:                 # the server's data: no workspace check can see it
            return Law0Report("unverified", backed, checks, unverified=[backed], answer=answer)
        derived = self.derive()
        derived = derived if claims_none else filecheck.unslipped(self, derived, checks)
        file = derived.output_file if derived.available or derived.output_file else ""
        if derived.available and derived.effects is not None:
            # also when the executor found nothing: a check that changed its copy found a change
            return filecheck.check_effects(self, derived, after, changes, checks, answer, revealed,
                                       records)
        unexpected = [p for p in changes.modified + changes.deleted if p != file]
        if unexpected:
            checks.append(f"changed and not asked for: {', '.join(unexpected[:10])}")
        if file and file.rstrip("/") in made:
            # the check's FILE is a folder this subtask made: its name is all there is to
            # compare, and they agree on it — done, with nothing a check could verify
            return Law0Report("unverified", f"{file} is a folder this subtask made, as the "
                              f"independent check named it", checks,
                              unverified=[f"{file} is a folder: an empty folder's name is all "
                                          f"a check can compare"], answer=answer)
        if file:
            return filecheck.check_file(self, file, derived, changes, checks, unexpected, answer,
                                    revealed, records)
        if not claims_none and not (changes.touched or changes.deleted or made) and \
                ev.asks_to_change(self.subtask.intent or self.goal):
            # no file to check: listing what to delete, move or write is not doing it, and a
            # check that lists the same agrees all the same
            return Law0Report(
                "failed", "the task asks for a change to the workspace, but nothing in it "
                "changed", checks,
                what_was_wrong="nothing in the workspace changed: no file was written, moved, "
                               "renamed or deleted",
                what_to_do="make the change the task asks for with a tool call, then show the "
                           "result (cat or ls)", answer=answer)
        if not derived.available:
            if claims_none:
                return unconfirmed_absence(derived.why_unavailable, checks, answer)
            return Law0Report("unverified", derived.why_unavailable, checks,
                              unverified=[derived.why_unavailable], answer=answer)
        shown = head_tail(derived.output.strip(), 300) or "(nothing)"
        checks.append(f"independent check `{derived.label}` printed: {shown}")
        if claims_none:
            if ev.is_absence(derived.output) or derived.output.strip() == "0":
                absent = ev.absent_terms(self.goal, self.before_dir or self.workspace)
                if not absent:
                    return Law0Report(
                        "failed", "the executor says it does not exist, but everything the goal "
                        "names occurs in the workspace", checks,
                        what_was_wrong="everything the task names exists in the workspace files",
                        what_to_do="look at the files again and compute the answer with a "
                                   "command", answer=answer)
                if not looks_for_absent(self, derived.command):
                    return unconfirmed_absence(
                        f"nothing found, but no check looked for {', '.join(absent[:3])}",
                        checks, answer)
                return Law0Report("not_possible", f"not found: the executor found nothing and an "
                                  f"independent check (`{derived.label}`) printed nothing",
                                  checks, answer=answer)
            return Law0Report(
                "failed", f"the executor says it does not exist, but an independent check "
                f"(`{derived.label}`) printed: {shown}", checks, disagreement=True,
                what_was_wrong=f"you said it does not exist, but `{derived.label}` printed: "
                               f"{shown}",
                what_to_do="look again; if that output answers the goal, give the answer from "
                           "a tool output", answer=answer)
        if ev.is_absence(derived.output):
            return Law0Report(
                "failed", f"an independent check (`{derived.label}`) found nothing, but the "
                f"answer is: {head_tail(answer, 200)}", checks, disagreement=True,
                what_was_wrong=f"an independent check (`{derived.label}`) found nothing for "
                               f"this goal, but you answered {head_tail(answer, 200)}",
                what_to_do="check that what the goal names exists exactly (not a similar name); "
                           "if it does not exist, reply with status not_possible", answer=answer)
        verdict = ev.agree(answer, derived.output, goal=self.goal,
                           data=[o for _, o in outputs] + [derived.output])
        # a check that printed no value, or that looks for a value spelt several ways in its
        # field exactly (records left out), is no evidence either way: the check in the other
        # form decides (with a resample of the first form confirming too: verified; alone:
        # done, but not verified; not confirming: failed, as before). Refuting on it threw
        # away right answers whose check had a bug (`'Berlin' in x.lower()` printed 0)
        missed = misses_records(self, derived)
        if not verdict.agree and (verdict.void or missed):
            why = f"the independent check misses records: {missed}" if missed else verdict.reason
            return Law0Report("unverified", f"{why} (answer: {head_tail(answer, 200)}; "
                              f"`{derived.label}` printed: {shown})", checks, unverified=[why],
                              doubts=[why], void=True, answer=answer)
        if not verdict.agree:
            return Law0Report(
                "failed", f"{verdict.reason} (answer: {head_tail(answer, 200)}; independent "
                f"check `{derived.label}` printed: {shown})", checks, disagreement=True,
                what_was_wrong=f"your answer {head_tail(answer, 200)!r} does not agree with an "
                               f"independent check: `{derived.label}` printed: {shown}",
                what_to_do=ANSWER_AGAIN, answer=answer)
        report = Law0Report("verified", f"the answer agrees with an independent check "
                            f"(`{derived.label}` printed {shown})", checks, answer=answer)
        self._mark_echo(report, derived, records, "the answer")
        if missed:
            void(report, f"the independent check misses records: {missed}")
        counted = datafiles.header_counted(self.before_dir or self.workspace, self.goal, answer)
        if counted:
            report.kind = "unverified"
            report.unverified.append(f"the answer is the number of lines of {counted} with its "
                                     f"header line, which is no record")
        if revealed:
            # this attempt's commands other than the shown check's — run as it was, or inside
            # another command (`find f -exec <the check's program> \;` printed its value again)
            check_cmd = _norm_cmd(derived.command)
            own = _outputs([r for r in (current or []) if check_cmd not in _norm_cmd(r.target)])
            if not own or ev.unsupported_values(answer, own, self.goal):
                void(report, "the answer agrees with the independent check only after the "
                              "executor was shown its output")
        if unexpected:
            report.kind = "unverified"
            report.unverified.append(f"files changed that the goal did not ask for: "
                                     f"{', '.join(unexpected[:10])}")
        return report

    def _mark_echo(self, report: Law0Report, derived: DerivedCheck,
                   records: list[ToolCallRecord], what: str) -> None:
        """Agreement that is not independent evidence (`independence.doubts`) leaves the
        result unverified."""
        shell = [r.target for r in records if r.tool == "shell"]
        doubts = independence.doubts(
            what, derived.command, shell, root=self.before_dir or self.workspace,
            names=self.names, files=self.before, verified=report.kind == "verified")
        if doubts:
            report.kind = "unverified"
            report.unverified.extend(doubts)
            report.doubts.extend(doubts)
            report.void = report.void or \
                independence.own_method(derived.command, shell, self.names) is not None


COPY_PREFIX = "artoo-before-"


def sweep_stale_copies() -> None:
    """Remove before-copies left by effectors that were killed before they could clean up
    (the directory name carries the owner's pid)."""
    try:
        entries = [e for e in os.scandir(tempfile.gettempdir())   # no glob: no regex to compile
                   if e.name.startswith(COPY_PREFIX)]
    except OSError:
        return
    for entry in entries:
        try:
            pid = int(entry.name[len(COPY_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(entry.path, ignore_errors=True)
