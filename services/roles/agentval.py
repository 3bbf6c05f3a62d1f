"""R4a Agent-Validator (seeds/000 §6; Go digest §2.5): the fast loop's sensor and controller.

For each ExecutionResult it judges every success criterion against the tool records (tool output is
ground truth; the executor's output is only a claim), then decides in code: all met → matched; an
operator's Law 1 denial, an executor `failed` status, an infrastructure error, or a verdict of
`failed` with only environmental causes → failed without retry; otherwise one CorrectionSignal
while scored attempts remain (`validator_max_attempts`, maxRetries 2), then failed. Code, not the
LLM, has the last word where it can check: a verifiable criterion claimed met without any
successful tool record, or with evidence that is a placeholder or only repeats the executor's claim
or the criterion, is not met; permission / not-found / network / timeout / [LAW1] evidence promotes
a failed criterion to environmental (never the reverse). Each attempt adds a gap-trajectory point;
the outcome's criteria_verdicts count failed_attempts/attempts so GGS can weight plausible criteria
by k/N.

Law 0 (`verifier.Verifier`): a model's "met" is never enough. Once the opinion (remote backends
only; the bundled model's opinion proved worthless as evidence, so it is not asked) finds every
criterion met, code checks the result: invented values, the files the goal asks for, agreement
with an independent re-derivation. Only code-checked criteria are `checked`; the outcome is
`verified`, unverified (with the reason), `not_possible` (the executor and the independent check
agree the thing is absent: no retry), or a correction that shows both outputs. A verdict whose
own fields disagree (met, with a stated defect) is not met.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.messages import (CorrectionSignal, Criterion, CriterionVerdict, ExecutionResult,
                               GapTrajectoryPoint, SubTask, SubTaskOutcome, ToolCallRecord)
from protocol.settings import Settings

from services.runtime import tasklog, telemetry
from services.safety.law1 import LAW1
from services.runtime.llm import LLMError
from services.safety.tools import head_tail
from services.safety import evidence as values
from services.safety import referents
from . import rounds
from .confirm import derive_ahead
from .law0report import conceal_checks
from .verifier import Law0Report, Verifier, answer_text

log = logging.getLogger("artoo.agentval")

ENVIRONMENTAL_EVIDENCE = {
    "permission": re.compile(r"permission denied|operation not permitted|access denied|"
                             r"\beacces\b|\beperm\b|read-only file system", re.I),
    "not-found": re.compile(r"no such file|not found|does not exist|doesn't exist|"
                            r"cannot find|\benoent\b|command not found|"
                            r"executable file not found|no such directory", re.I),
    "network": re.compile(r"connection refused|connection reset|network is unreachable|"
                          r"network error|could not resolve|name or service not known|"
                          r"temporary failure in name resolution|no route to host|"
                          r"ssl error|unavailable: no search provider", re.I),
    "timeout": re.compile(r"timed out|time out|timeout|deadline exceeded", re.I),
    "law1": re.compile(re.escape(LAW1)),
}
_INFRA = re.compile(r"executor LLM error|context canceled|deadline exceeded|LLM call failed|"
                    r"invalid LLM output", re.I)


def environmental_cause(text: str) -> Optional[str]:
    """The environmental class that evidence text shows, if any."""
    for cause, pattern in ENVIRONMENTAL_EVIDENCE.items():
        if pattern.search(text or ""):
            return cause
    return None


class CriterionJudgement(BaseModel):
    model_config = ConfigDict(extra="ignore")
    criterion: str = ""
    met: bool = False
    evidence: str = ""
    failure_class: str = ""

    @model_validator(mode="before")
    @classmethod
    def _tolerate(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        value = dict(value)
        if "met" not in value:
            verdict = str(value.get("verdict") or value.get("result") or "").lower()
            value["met"] = verdict in ("pass", "met", "true", "yes", "passed", "ok")
        elif isinstance(value["met"], str):
            value["met"] = value["met"].strip().lower() in ("true", "yes", "pass", "met")
        _text_fields(value, ("criterion", "evidence", "failure_class"))
        return value


def _text_fields(value: dict, keys: tuple[str, ...]) -> None:
    """Small models answer null or nested JSON where a string belongs: coerce, don't reject."""
    for key in keys:
        if value.get(key) is None:
            value[key] = ""
        elif not isinstance(value[key], str):
            value[key] = json.dumps(value[key], ensure_ascii=False)


class ValidatorReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    criteria: list[CriterionJudgement] = Field(default_factory=list)
    verdict: str = ""
    what_was_wrong: str = ""
    what_to_do: str = ""

    @model_validator(mode="before")
    @classmethod
    def _tolerate(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = dict(value)
            for alias in ("criteria_results", "criteria_verdicts", "results"):
                if "criteria" not in value and isinstance(value.get(alias), list):
                    value["criteria"] = value[alias]
            _text_fields(value, ("verdict", "what_was_wrong", "what_to_do"))
        return value


_SYSTEM = """You are the Agent-Validator of artoo. For each success criterion of a subtask, decide whether the tool records prove it is met.
Rules:
- Tool records are ground truth; the executor's output is only its claim.
- A criterion is met only when a record shows it. A plausible criterion is met when the output is consistent with the records.
- A claimed action (write, download, delete, run) that a record shows failed or was refused is NOT met.
- A correct search that finds nothing is a valid answer.
- For each unmet criterion, failure_class is "environmental" (permission, missing file or command, network, timeout, [LAW1] refusal) or "logical" (wrong approach, target or reasoning).
- verdict: "matched" if all are met; "retry" if another attempt could fix it; "failed" if it cannot be done.
Reply with JSON only: {"criteria":[{"criterion":"...","met":true,"evidence":"...","failure_class":""}],"verdict":"matched","what_was_wrong":"","what_to_do":""}
evidence: words copied from the tool record that proves or disproves the criterion."""


@dataclass
class Judgement:
    kind: str                                   # matched / retry / failed
    outcome: Optional[SubTaskOutcome] = None
    correction: Optional[CorrectionSignal] = None


class AgentValidator:
    """R4a for one subtask (all its attempts)."""

    def __init__(self, subtask: SubTask, llm, settings: Settings,
                 verifier: Optional[Verifier] = None):
        self.subtask = subtask
        self.verifier = verifier
        self.revealed = False          # a correction showed the independent check's output
        self.llm = llm
        self.settings = settings
        self.criteria: list[Criterion] = list(subtask.success_criteria) or [
            Criterion(text=subtask.intent, mode="verifiable")]
        self.max_attempts = max(1, settings.validator_max_attempts)
        self.code_fixed = False        # one attempt that only runs a fix code composed was granted
        self.local = local = bool(getattr(llm, "local", False))
        self.record_budget = (1500 if local else 2 * settings.tool_output_chars)
        self.records: list[tuple[int, ToolCallRecord]] = []   # (attempt, record), all attempts
        self.attempt_verdicts: list[list[CriterionVerdict]] = []
        self.trajectory: list[GapTrajectoryPoint] = []
        self.last_output: Any = None
        self.task_id = subtask.parent_task_id
        self.law0: Optional[Law0Report] = None
        # With an independent checker on the bundled model, code alone decides (no opinion call)
        self.code_only = local and verifier is not None

    # -- prompt -------------------------------------------------------------------------------
    def user_prompt(self, result: ExecutionResult) -> str:
        lines = [f"Today's date: {time.strftime('%Y-%m-%d (%A)')}",
                 f"Subtask: {self.subtask.intent}", "Criteria:"]
        lines += [f"{i}. [{c.mode}] {c.text}" for i, c in enumerate(self.criteria, 1)]
        claim = result.output if isinstance(result.output, str) else json.dumps(
            result.output, ensure_ascii=False, default=str)
        lines.append(f"Executor status: {result.status}")
        lines.append(f"Executor output (a claim): {head_tail(claim or '(none)', 1500)}")
        if result.uncertainty:
            lines.append(f"Executor uncertainty: {result.uncertainty}")
        if not self.records:
            lines.append("Tool records: none (no tool was called).")
        else:
            lines.append("Tool records (ground truth, oldest first):")
            per = max(300, self.record_budget // max(1, len(self.records)))
            for i, (attempt, rec) in enumerate(self.records, 1):
                target = " ".join((rec.target or json.dumps(rec.arguments)).split())[:200]
                status = f"ERROR: {rec.error}" if rec.error else "ok"
                lines.append(f"#{i} (attempt {attempt}) {rec.tool} {target} → {status}")
                if rec.output and rec.output != rec.error:
                    lines.append(head_tail(rec.output, per))
        return "\n".join(lines)

    # -- judging ------------------------------------------------------------------------------
    @telemetry.traced("check", task=lambda self, result: result.task_id,
                      attrs=lambda self, result: {"artoo.attempt": result.attempt,
                                                  "artoo.subtask.id": result.subtask_id})
    def judge(self, result: ExecutionResult) -> Judgement:
        attempt = len(self.attempt_verdicts) + 1
        self.records += [(result.attempt, r) for r in result.tool_calls]
        self.last_output = result.output
        reply: Optional[ValidatorReply] = None
        infra_error = ""
        # failed → failed outcome, no scoring call; on the bundled model code alone decides
        if result.status not in ("failed", "not_possible") and not self.code_only:
            if self.verifier is not None:
                derive_ahead(self.verifier)     # the checker's first derivation, meanwhile
            try:
                reply = self.llm.complete_json(ValidatorReply, _SYSTEM,
                                               self.user_prompt(result), task_id=self.task_id)
            except LLMError as exc:
                infra_error = f"scoring error: {exc}"
            except Exception as exc:  # never silence
                infra_error = f"scoring error: {type(exc).__name__}: {exc}"
        verdicts = self._verdicts(result, reply, infra_error)
        law0: Optional[Law0Report] = None
        if self.verifier is not None and result.status != "failed" and not infra_error and \
                all(v.verdict == "pass" for v in verdicts):
            try:
                law0 = self.verifier.check(result, [r for _, r in self.records],
                                           current=list(result.tool_calls),
                                           revealed=self.revealed)
            except Exception as exc:  # a checker bug: honest "unverified", never a crash
                log.exception("Law 0 check failed")
                law0 = Law0Report("unverified", f"the code checks failed: {exc}",
                                  unverified=[f"the code checks failed: {exc}"],
                                  answer=answer_text(result.output))
            if law0.kind == "unverified" and result.status not in ("completed", "not_possible") \
                    and not law0.answer_stated:
                # an executor that gave up without stating anything has not done the task
                law0 = Law0Report("failed", f"no answer: the executor ended "
                                  f"{result.status} ({result.uncertainty or 'no result'})",
                                  law0.checks, what_was_wrong="you gave no answer",
                                  what_to_do="run a command that prints the answer, then reply "
                                             "ANSWER: <the value>", answer=law0.answer)
            verdicts = _apply_law0(verdicts, law0)
        self.law0 = law0
        self.attempt_verdicts.append(verdicts)
        unmet = [v for v in verdicts if v.verdict == "fail"]
        classes = {v.failure_class for v in unmet}
        aggregate = "" if not unmet else (classes.pop() if len(classes) == 1 else "mixed")
        score = round(1 - len(unmet) / len(verdicts), 4)
        self.trajectory.append(GapTrajectoryPoint(attempt=attempt, score=score,
                                                  unmet_criteria=[v.criterion for v in unmet],
                                                  failure_class=aggregate))
        for v in verdicts:
            tasklog.append(self.settings.tasks_dir, self.task_id, "criterion_verdict",
                           subtask_id=self.subtask.subtask_id, attempt=attempt,
                           criterion=v.criterion, met=v.verdict == "pass", evidence=v.evidence,
                           failure_class=v.failure_class or None)
        denials = [r for _, r in self.records if r.law1 and _operator_denied(r)]
        if not unmet:
            return self._final("matched", None)
        if law0 is not None and law0.kind == "not_possible":
            return self._final("failed", f"not possible: {law0.evidence}")
        if result.status == "failed":
            return self._final("failed", f"executor failed: {result.uncertainty or result.output}")
        if infra_error:
            return self._final("failed", infra_error)
        if denials:
            return self._final("failed", "; ".join(_law1_lines(denials)) or "refused by Law 1")
        # "failed" (cannot be done) ends the loop only for environmental causes: a logical miss
        # is what the second attempt is for, whatever verdict word a small model picked.
        if reply is not None and reply.verdict.strip().lower() == "failed" and \
                all(v.failure_class == "environmental" for v in unmet):
            return self._final("failed", f"validator: {reply.what_was_wrong or 'cannot be done'}")
        fix = law0.fix if law0 is not None and law0.kind == "failed" else ""
        # a flaw code knows the fix of costs no model call to mend: past the last attempt the
        # executor still runs the fix as one more attempt, judged as any other (once per subtask)
        extra = bool(fix) and attempt >= self.max_attempts and not self.code_fixed
        if attempt < self.max_attempts or extra:
            self.code_fixed |= extra
            first = unmet[0]
            wrong = (law0.what_was_wrong if law0 is not None and law0.kind == "failed" else
                     reply.what_was_wrong if reply and reply.what_was_wrong else
                     f"not met: {first.criterion} ({first.evidence})")
            todo = (law0.what_to_do if law0 is not None and law0.kind == "failed" else
                    reply.what_to_do if reply and reply.what_to_do else
                    "use a different approach and prove each criterion with a tool call")
            if law0 is not None and law0.disagreement:
                self.revealed = True
            back = self.verifier.undo_attempt() if self.verifier is not None else []
            if back:
                todo += (f" (your changes to {', '.join(back[:5])} were undone: it is back as "
                         f"it was before your first attempt; make the whole change on it again)")
            own = [r.target for _, r in self.records if r.tool == "shell"]
            correction = CorrectionSignal(
                task_id=self.task_id, subtask_id=self.subtask.subtask_id, attempt_number=attempt,
                failed_criterion=first.criterion, failure_class=first.failure_class,
                what_was_wrong=conceal_checks(wrong, own), what_to_do=conceal_checks(todo, own),
                fix_command=fix)
            tasklog.append(self.settings.tasks_dir, self.task_id, "correction",
                           subtask_id=self.subtask.subtask_id, attempt=attempt,
                           what_was_wrong=correction.what_was_wrong,
                           what_to_do=correction.what_to_do, fix_command=fix or None)
            return Judgement("retry", correction=correction)
        last_issue = (law0.evidence if law0 is not None and law0.kind == "failed" else
                      reply.what_was_wrong if reply and reply.what_was_wrong
                      else f"not met: {unmet[0].criterion}")
        if law0 is not None and law0.kind == "failed" and not law0.disagreement and \
                self.verifier is not None:
            # code proved the last attempt's work wrong (a glued line, an empty deliverable):
            # the user's files it changed come back, and a next round starts from them, not
            # from the flaw. Work a check merely disagreed with stays: it may be right.
            back = self.verifier.undo_attempt()
            if back:
                last_issue += f" (put back as before the work: {', '.join(back[:5])})"
        return self._final("failed", f"max retries ({self.max_attempts}) reached; last issue: "
                                     f"{last_issue}")

    def _verdicts(self, result: ExecutionResult, reply: Optional[ValidatorReply],
                  infra_error: str) -> list[CriterionVerdict]:
        judgements = list(reply.criteria) if reply else []
        # Match by text first; criteria the LLM reworded take the leftover judgements in order.
        assigned: dict[int, CriterionJudgement] = {}
        free = list(range(len(judgements)))
        for i, crit in enumerate(self.criteria):
            k = next((k for k in free if _norm(judgements[k].criterion) == _norm(crit.text)), None)
            if k is not None:
                assigned[i] = judgements[k]
                free.remove(k)
        for i in range(len(self.criteria)):
            if i not in assigned and free:
                assigned[i] = judgements[free.pop(0)]
        ok_records = [r for _, r in self.records if not r.error]
        out: list[CriterionVerdict] = []
        for i, crit in enumerate(self.criteria):
            j = assigned.get(i)
            if result.status == "failed":
                met, evidence = False, f"executor failed: {result.uncertainty or result.output}"
                klass = "environmental" if _INFRA.search(evidence) else ""
            elif infra_error:
                met, evidence, klass = False, infra_error, "environmental"
            elif j is None and self.verifier is not None and (
                    self.code_only or result.status == "not_possible"):
                out.append(CriterionVerdict(criterion=crit.text, mode=crit.mode, verdict="pass",
                                            evidence="(decided by the code checks)"))
                continue
            elif j is None:
                met, evidence, klass = False, "not judged by the validator", "logical"
            else:
                met, evidence = j.met, j.evidence
                klass = j.failure_class.strip().lower()
                if met and (defect := _stated_defect(reply)):
                    met, klass = False, "logical"
                    evidence = (f"self-contradicting verdict: met, but the validator itself says "
                                f"{defect[:200]!r}")
                elif met and (missing := _evidence_lacks_value(evidence, result, ok_records)):
                    met, klass = False, "logical"
                    evidence = (f"the evidence given ({str(evidence)[:120]!r}) contains none of "
                                f"the claimed values ({missing})")
            if met and crit.mode == "verifiable" and not ok_records:
                met = False
                evidence = ("no successful tool call supports this; the executor's claim alone "
                            "is not evidence")
                klass = "logical"
            elif met and crit.mode == "verifiable" and not _substantive(evidence):
                met = False
                evidence = (f"the evidence given ({str(evidence)[:120]!r}) names nothing from "
                            f"the tool records (a placeholder is not evidence)")
                klass = "logical"
            elif met and crit.mode == "verifiable" and (
                    copied := _copied_from(evidence, result, crit.text, ok_records)):
                met = False
                evidence = (f"the evidence given ({str(evidence)[:120]!r}) repeats {copied}, "
                            f"which no tool record shows")
                klass = "logical"
            if met:
                klass = ""
            else:
                klass = klass if klass in ("logical", "environmental") else "logical"
                if klass != "environmental":
                    klass = self._promote(evidence, result)
            out.append(CriterionVerdict(criterion=crit.text, mode=crit.mode,
                                        verdict="pass" if met else "fail", failure_class=klass,
                                        evidence=str(evidence)[:500]))
        return out

    def _promote(self, evidence: str, result: ExecutionResult) -> str:
        """Law 0 in code: environmental evidence promotes a failure, whatever the LLM said."""
        texts = [evidence or ""]
        for _, rec in self.records:
            if rec.law1:
                return "environmental"
            if rec.error:
                texts.append(rec.error)
                texts.append(rec.output or "")
        if result.status == "failed":
            texts += [result.uncertainty or "", str(result.output or "")]
        return "environmental" if any(environmental_cause(t) for t in texts) else "logical"

    def _final(self, status: str, reason: Optional[str]) -> Judgement:
        n = len(self.attempt_verdicts)
        last = self.attempt_verdicts[-1]
        verdicts = []
        for idx, v in enumerate(last):
            failed = sum(1 for attempt in self.attempt_verdicts
                         if idx < len(attempt) and attempt[idx].verdict == "fail")
            verdicts.append(v.model_copy(update={"failed_attempts": failed, "attempts": n}))
        law1_lines = _law1_lines([r for _, r in self.records if r.law1])
        if status == "failed" and law1_lines and reason and LAW1 not in reason:
            reason = f"{reason}; " + "; ".join(law1_lines)
        outcome = SubTaskOutcome(
            task_id=self.task_id, subtask_id=self.subtask.subtask_id,
            parent_task_id=self.subtask.parent_task_id, intent=self.subtask.intent,
            success_criteria=self.criteria, status=status, output=self.last_output,
            failure_reason=reason if status == "failed" else None,
            gap_trajectory=list(self.trajectory), criteria_verdicts=verdicts,
            tool_calls=[r for _, r in self.records], plan_round=self.subtask.plan_round,
            sequence=self.subtask.sequence, answer=answer_text(self.last_output))
        if self.verifier is not None:
            outcome.changed = self.verifier.left_changed()
            self.verifier.close()          # the outcome is decided: the before-copy goes
        law0 = self.law0
        if law0 is not None:
            outcome.answer = law0.answer or outcome.answer
            outcome.checks = list(law0.checks)
            outcome.unverified = list(law0.unverified)
            outcome.not_possible = status == "failed" and law0.kind == "not_possible"
            outcome.verified = (status == "matched" and law0.kind == "verified") or \
                outcome.not_possible
        elif status == "matched":
            outcome.unverified = ["no code check ran (no independent checker)"]
        tasklog.append(self.settings.tasks_dir, self.task_id, "subtask_end",
                       subtask_id=self.subtask.subtask_id, status=status,
                       failure_reason=outcome.failure_reason, attempts=n,
                       verified=outcome.verified, not_possible=outcome.not_possible,
                       checks=outcome.checks, unverified=outcome.unverified,
                       changed=outcome.changed,
                       **(rounds.record(self.verifier) if self.verifier is not None else {}))
        return Judgement(status, outcome=outcome)

    def absent_outcome(self, missing: list) -> SubTaskOutcome:
        """The outcome of a goal that reads what the workspace lacks (referents resolved in code,
        before any model call): not_possible, with what is missing and the near matches the
        workspace offers. Code checked it, so it is verified without a model."""
        report = referents.absence_report(missing)
        checks = [f"referent {r.describe()}" for r in missing]
        self.law0 = Law0Report("not_possible", f"not found: {report}", checks,
                               answer=f"Not possible: {report}")
        self.last_output = f"Not possible: {report}"
        self.attempt_verdicts.append([CriterionVerdict(
            criterion=c.text, mode=c.mode, verdict="fail", failure_class="logical",
            evidence=f"not found: {report}"[:500], checked=True) for c in self.criteria])
        tasklog.append(self.settings.tasks_dir, self.task_id, "referents_missing",
                       subtask_id=self.subtask.subtask_id, missing=[r.as_dict() for r in missing])
        return self._final("failed", f"not possible: {report}").outcome

    def deadline_outcome(self, records: list[ToolCallRecord], reason: str) -> SubTaskOutcome:
        """A failed outcome when the subtask runs out of time mid-attempt (with what ran)."""
        seen = {id(r) for _, r in self.records}
        extra = [r for r in records if id(r) not in seen]
        law1_lines = _law1_lines([r for r in [*(r for _, r in self.records), *extra] if r.law1])
        if law1_lines:
            reason = f"{reason}; " + "; ".join(law1_lines)
        n = max(1, len(self.attempt_verdicts))
        verdicts = [CriterionVerdict(criterion=c.text, mode=c.mode, verdict="fail",
                                     failure_class="environmental", evidence=reason[:500],
                                     failed_attempts=n, attempts=n) for c in self.criteria]
        return SubTaskOutcome(
            task_id=self.task_id, subtask_id=self.subtask.subtask_id,
            parent_task_id=self.subtask.parent_task_id, intent=self.subtask.intent,
            success_criteria=self.criteria, status="failed", output=self.last_output,
            failure_reason=reason, gap_trajectory=list(self.trajectory),
            criteria_verdicts=verdicts, tool_calls=[r for _, r in self.records] + extra,
            plan_round=self.subtask.plan_round, sequence=self.subtask.sequence)


def _apply_law0(verdicts: list[CriterionVerdict], law0: Law0Report) -> list[CriterionVerdict]:
    """The verdicts once code has checked the result: code-checked evidence replaces opinion."""
    ev_text = law0.evidence[:500]
    if law0.kind == "verified":
        return [v.model_copy(update={"verdict": "pass", "failure_class": "", "checked": True,
                                     "evidence": ev_text}) for v in verdicts]
    if law0.kind == "unverified":
        return [v.model_copy(update={"checked": False,
                                     "evidence": f"unverified: {ev_text}"[:500]})
                for v in verdicts]
    klass = "environmental" if law0.kind == "not_possible" else "logical"
    return [v.model_copy(update={"verdict": "fail", "failure_class": klass, "checked": True,
                                 "evidence": ev_text}) for v in verdicts]


_NO_DEFECT = re.compile(r"^\W*(none|n/?a|nothing|no issues?|no problems?|-|null|"
                        r"nothing was wrong|all criteria (are |were )?met)\W*$", re.I)


def _stated_defect(reply: Optional[ValidatorReply]) -> str:
    """The defect a reply states about itself (what_was_wrong), if it states one."""
    text = (reply.what_was_wrong if reply else "").strip()
    return "" if not text or _NO_DEFECT.match(text) else text


def _evidence_lacks_value(text: str, result: ExecutionResult,
                          records: list[ToolCallRecord]) -> str:
    """Evidence for a claimed answer that contains none of its values and cites no record:
    returns the values it lacks, or ""."""
    claimed = values.answer_values(answer_text(result.output))
    if not claimed or not (text or "").strip():
        return ""
    if any(v in values.Corpus.of([text]) for v in claimed):
        return ""
    quoted = _norm(text)
    if len(quoted) >= 8 and any(quoted in _norm(f"{r.target} {r.output}") for r in records):
        return ""
    return ", ".join(claimed[:3])


def _operator_denied(record: ToolCallRecord) -> bool:
    """An approval that was asked and refused (as opposed to a confinement refusal, which a
    different approach can avoid)."""
    text = record.error or record.output or ""
    return text.startswith(f"{LAW1} refused:") and ("the operator declined" in text or
                                                    "no operator" in text or
                                                    "no answer from the operator" in text)


def _law1_lines(records: list[ToolCallRecord]) -> list[str]:
    out: list[str] = []
    for rec in records:
        text = (rec.error or rec.output or "").strip()
        line = text.splitlines()[0] if text else f"{LAW1} refused: {rec.tool} {rec.target}"
        line = line if line.startswith(LAW1) else f"{LAW1} {line}"
        line = line.split(" The action was not performed")[0]
        if line not in out:
            out.append(line[:300])
    return out


_GENERIC = frozenset("""the and for from with that this was were are is not has have had its
into onto than then them they there their what when which while who will would should could quote
short record records tool tools output outputs result results evidence shown show shows proof proves
criterion criteria met ok text file files call calls command attempt executor validator true false
none null yes""".split())
_WORD = re.compile(r"[A-Za-z0-9_./-]{3,}")


def _substantive(evidence: str) -> bool:
    """Evidence must name something specific (a file, a number, a word of the output); a copied
    placeholder ("<short quote from a record>", "...") or a bare "ok" does not."""
    words = {w.lower().strip("./-") for w in _WORD.findall(evidence or "")}
    if any(ch.isdigit() for ch in evidence or ""):
        return True
    return any(len(w) >= 3 and w not in _GENERIC for w in words)


def _copied_from(evidence: str, result: ExecutionResult, criterion: str,
                 records: list[ToolCallRecord]) -> str:
    """Evidence copied from the executor's claim or from the criterion itself rather than from a
    tool record: returns what it was copied from, or "" when it is (also) in a record."""
    ev = _norm(evidence)
    if len(ev) < 8 or any(ev in _norm(f"{r.target} {r.output}") for r in records):
        return ""
    claim = result.output if isinstance(result.output, str) else json.dumps(
        result.output, ensure_ascii=False, default=str)
    if ev in _norm(claim or ""):
        return "the executor's claim"
    if ev in _norm(criterion) or _norm(criterion) in ev:
        return "the criterion"
    return ""


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split()).strip(" .")
