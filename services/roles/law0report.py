"""What Law 0 reports about one attempt (`Law0Report`), and the checks decided from the record
alone, before any checking model call (`record_flaw`)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from protocol.messages import ExecutionResult, SubTask, ToolCallRecord

from services.safety import evidence as ev, record


# the executor's result after a clean command that changed files and printed nothing: no answer
# of its own (R4a then says what changed)
SILENT_WRITE = "done (the command printed nothing)"
# the correction for an answer no check stands behind
ANSWER_AGAIN = ("find which is right with another command, then answer with only the value(s) "
                "the goal asks for")


@dataclass
class Law0Report:
    kind: Literal["verified", "unverified", "not_possible", "failed"]
    evidence: str
    checks: list[str] = field(default_factory=list)        # what code checked, one line each
    unverified: list[str] = field(default_factory=list)    # what could not be checked
    what_was_wrong: str = ""
    what_to_do: str = ""
    answer: str = ""
    disagreement: bool = False          # failed only because the derivation disagreed
    answer_stated: bool = False         # the answer states a value, or the file exists
    doubts: list[str] = field(default_factory=list)        # agreement that was not independent
    void: bool = False                  # the agreement is no evidence at all: the check used the
                                        # executor's own method, or the executor saw its output
    fix: str = ""                       # the command code knows fixes the flaw (CorrectionSignal)
    copied: bool = False                # the answer repeats the value a correction showed


def unconfirmed_absence(why: str, checks: list[str], answer: str) -> Law0Report:
    """"Nothing found" is no value: it is a result only when a check confirms the absence
    (not_possible); unconfirmed, the attempt failed — never "done"."""
    return Law0Report(
        "failed", f"the answer says nothing was found, and that could not be confirmed "
        f"({why})", checks, answer=answer,
        what_was_wrong="you found nothing, and no independent check confirmed that nothing "
                       "matches",
        what_to_do="search the files' contents (any case, whole workspace) for what the goal "
                   "names, and answer from what you find; reply NOT POSSIBLE only if a "
                   "search of the contents prints nothing")


def answer_text(output: Any) -> str:
    if output is None:
        return ""
    return output.strip() if isinstance(output, str) else json.dumps(
        output, ensure_ascii=False, default=str)


_ABSENCE_CLAIM = re.compile(r"\b(no such|not found|does not exist|doesn't exist|do not exist|"
                            r"don't exist|not exist|no \w+ (named|called|with)|is not (in|present)|"
                            r"isn't (in|present)|not present|cannot be found|none found|"
                            r"no match|no matching|not possible|there is no|there are no)\b", re.I)


def claims_absence(text: str) -> bool:
    return bool(_ABSENCE_CLAIM.search(text or ""))


def record_flaw(subtask: SubTask, goal: str, workspace: str, result: ExecutionResult,
                answer: str, records: list[ToolCallRecord], refs: list, *, claims_none: bool,
                file_work: bool) -> Optional[Law0Report]:
    """Outcome from the record, not from the words (services/safety/record.py): an answer
    that is an error, a traceback or code; a file or folder the goal makes that is missing
    or empty; "nothing found" for what the referent resolution found. Each is a failed
    attempt, decided before any checking model call."""
    bad = "" if file_work or result.status == "not_possible" else \
        record.not_a_value(answer, records)
    if bad:
        return Law0Report("failed", bad, what_was_wrong=bad, answer=answer,
                          what_to_do="fix what failed and run the command again; answer "
                                     "with the value its output shows")
    if subtask.goal and ev.asks_to_change(goal) and (not claims_none or
                                                      record.inputs_present(refs)):
        # "not possible" about a goal that makes files, while everything it reads exists, is
        # contradicted by the record: the deliverable is simply missing
        missing = record.undelivered(refs, workspace, goal)
        if missing:
            file, fix = _write_out(missing, refs, answer, records)
            todo = (f"your command printed the result but did not write it to {file}: write "
                    f"it there: reply COMMAND: {fix} , then cat {file}") if fix else \
                "make what the goal asks for with a tool call, then show it (cat or ls)"
            return Law0Report("failed", "; ".join(missing), what_was_wrong="; ".join(missing),
                              answer=answer, what_to_do=todo, fix=fix)
    found = record.found_things(refs) if claims_none else []
    if found:
        where = "; ".join(f"{r.text!r} occurs in {', '.join(r.where[:3])}" for r in found)
        return Law0Report("failed", f"the answer says nothing was found, but {where}",
                          what_was_wrong=f"you found nothing, but {where}", answer=answer,
                          what_to_do="read that file again (exact spelling, any case) and "
                                     "answer from what it holds")
    return None


def _write_out(missing: list[str], refs: list, answer: str, records: list[ToolCallRecord]
               ) -> tuple[str, str]:
    """The one file the goal makes, left missing or empty, and the command that writes the
    result there, when the attempt printed its result instead (a short answer whose every value
    a successful command printed); else ("", ""). The small model, told only to "make" the file,
    ran the same printing command again; the executor now runs this one without its model."""
    files = [r.text for r in refs if r.role == "create" and r.kind == "file" and
             any(m.startswith(f"the file {r.text} ") for m in missing)]
    printed = [(f"{r.target} {json.dumps(r.arguments, ensure_ascii=False)}", r.output or "")
               for r in records if not r.error and r.output]
    text = answer.strip()
    # every value printed by a command, not merely in the goal's words: code runs this write,
    # and an answer that only names the deliverable ("backup/todo.txt") is no result to write
    if len(files) == 1 and len(missing) == 1 and ev.answer_values(text) and \
            len(text) <= 1000 and text.count("\n") < 10 and not text.startswith("[") and \
            not ev.unsupported_values(text, printed, ""):
        return files[0], record.write_out(files[0], text)
    return "", ""


_QUOTED = re.compile(r"`([^`]+)`")


def conceal_checks(text: str, own: list[str]) -> str:
    """A correction for the executor with the checks' commands and programs named by their
    form only: what a check printed is evidence, its command is not a method to copy. After a
    correction that spelt one out, the local model ran that very command next in 13 of 45 dev
    cases, and none of those tasks ended verified — a check cannot confirm its own method — while
    a wrong check copied did the damage (dev date-first-renames: a check's rename program, copied,
    renamed every csv to `sales-2024-01-sales-2024-01`). A query is kept (the executor cannot run
    SQL), and so are the executor's own commands and short values (`- [ ]`)."""
    mine = {" ".join(c.split()) for c in own}

    def hide(m: re.Match) -> str:
        body = m.group(1)
        if body.startswith("SQL ") or len(body) < 12 or " ".join(body.split()) in mine:
            return m.group(0)
        return "a program" if body.startswith("python3 ") else "a shell command"
    return _QUOTED.sub(hide, text or "")

