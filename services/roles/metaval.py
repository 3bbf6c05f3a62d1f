"""R4b Meta-Validator: fan-in of a plan round's outcomes, the hard gate, and the LLM merge.

* Fan-in per task and plan round: the DispatchManifest names the subtask ids; outcomes are
  de-duplicated by subtask id (the effector and the dispatcher's relay both deliver them) and
  outcomes that arrive before their manifest are kept until it does.
* Hard gate in code: any failed outcome → ReplanRequest, no LLM call.
* Otherwise one LLM merge judged against the task-level criteria → OutcomeSummary (accept) or a
  ReplanRequest carrying the task-criterion verdicts. Code holds the LLM to its own verdicts: an
  "accept" with a failed task criterion is a replan (GGS must not turn that into success).
* Any LLM or parse error → a ReplanRequest with the error as its gap (the Go reference hung here).
* maxReplans: the request that reaches `max_replans` recommends abandon.
* Fan-in state is persisted before an outcome is acknowledged, and a round that is complete but not
  yet evaluated is evaluated again by a restarted instance; state is dropped at FinalResult/TaskCancel.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Literal

from pydantic import BaseModel, Field

from protocol.bus import DEFER, BusClient
from protocol.envelope import Envelope
from protocol.messages import (Criterion, CriterionVerdict, DispatchManifest, FinalResult,
                               OutcomeSummary, ReplanRequest, SubTaskOutcome, TaskCancel)
from protocol.settings import Settings

from services.runtime import tasklog, telemetry
from .dispatcher import render_output
from .callbudget import calls_left
from services.safety.tools import head_tail
from services.runtime.llm import LLMClient, LLMError
from services.runtime.role import run_role
from services.runtime.takeover import Begun, Takeover
from services.runtime.taskstate import EXPIRE_AFTER_DEADLINE_S, TaskStateStore

ROLE = "metaval"
log = logging.getLogger("artoo.metaval")


class TaskCriterionJudgement(BaseModel):
    criterion: str
    verdict: Literal["pass", "fail"]
    evidence: str = ""
    failure_class: Literal["logical", "environmental", ""] = ""


class MergeVerdict(BaseModel):
    """What the meta-validator asks the LLM for."""
    verdict: Literal["accept", "replan"]
    summary: str = ""
    merged_output: Any = None
    task_criteria_verdicts: list[TaskCriterionJudgement] = Field(default_factory=list)
    gap_summary: str = ""


SYSTEM_PROMPT = """You are the Meta-Validator of artoo. Every subtask of the plan has reported success; merge their
outputs into the answer for the user and judge it against each task criterion.
- Judge only from the outputs and tool records shown; tool output is ground truth, claims are not.
- A criterion passes only when the outputs positively demonstrate it.
- merged_output is the concrete result (data, paths, numbers), not a description of the process.
- accept only if every task criterion passes; otherwise replan with a gap_summary saying what is missing.
- Never put a raw double quote inside a JSON string value; escape backslashes.
Reply with only JSON:
{"verdict": "accept" | "replan", "summary": "<one sentence>", "merged_output": <the combined result>,
 "task_criteria_verdicts": [{"criterion": "...", "verdict": "pass" | "fail", "evidence": "...",
                             "failure_class": "logical" | "environmental" | ""}],
 "gap_summary": "<what is missing, when replan>"}"""


def merge_prompt(intent: str, criteria: list[Criterion], outcomes: list[SubTaskOutcome],
                 budget: int) -> str:
    parts = [f"Task intent: {intent}", "Task criteria:"]
    parts += [f"- ({c.mode}) {c.text}" for c in criteria] or ["- (none stated: judge the intent)"]
    parts.append("Subtask outcomes:")
    per = max(500, budget // max(1, len(outcomes)))
    for o in outcomes:
        parts.append(f"## {o.intent or o.subtask_id} [{o.status}]")
        parts.append("output: " + head_tail(render_output(o.output), per))
        for t in o.tool_calls[-5:]:
            res = f"ERROR {t.error}" if t.error else head_tail(t.output, 300)
            parts.append(f"tool {t.tool} {t.target}: {res}")
    return "\n".join(parts)


def check_accept(verdict: MergeVerdict, criteria: list[Criterion]) -> tuple[bool, list[CriterionVerdict]]:
    """Hold the LLM to its own verdicts; returns (accepted, verdicts with each criterion's mode).

    A criterion the LLM did not judge individually counts as passed only under an overall accept."""
    modes = {c.text: c.mode for c in criteria}
    judged = {j.criterion.strip(): j for j in verdict.task_criteria_verdicts}
    out: list[CriterionVerdict] = []
    for c in criteria:
        j = judged.pop(c.text.strip(), None)
        if j is None:
            out.append(CriterionVerdict(
                criterion=c.text, mode=c.mode,
                verdict="pass" if verdict.verdict == "accept" else "fail",
                evidence="not judged individually; overall verdict " + verdict.verdict,
                attempts=1, failed_attempts=0 if verdict.verdict == "accept" else 1))
        else:
            out.append(CriterionVerdict(criterion=c.text, mode=c.mode, verdict=j.verdict,
                                        failure_class=j.failure_class if j.verdict == "fail" else "",
                                        evidence=j.evidence, attempts=1,
                                        failed_attempts=int(j.verdict == "fail")))
    for j in judged.values():  # criteria the LLM named differently: keep them, they are evidence
        out.append(CriterionVerdict(criterion=j.criterion, mode=modes.get(j.criterion, "verifiable"),
                                    verdict=j.verdict, evidence=j.evidence,
                                    failure_class=j.failure_class if j.verdict == "fail" else "",
                                    attempts=1, failed_attempts=int(j.verdict == "fail")))
    accepted = verdict.verdict == "accept" and all(v.verdict == "pass" for v in out)
    return accepted, out


def local_merge(outcomes: list[SubTaskOutcome], criteria: list[Criterion]) -> MergeVerdict | None:
    """On the bundled 1.5B model, skip the merge call when it could only repeat R4a: a single
    matched outcome whose passed criterion verdicts (decided by R4a's code checks) cover every
    task criterion word for word. The summary says what code checked — verified or not — never
    a model's "all criteria met". Anything else still goes to the LLM."""
    if len(outcomes) != 1 or outcomes[0].status != "matched":
        return None
    o = outcomes[0]
    passed = {v.criterion.strip(): v for v in o.criteria_verdicts if v.verdict == "pass"}
    if any(c.text.strip() not in passed for c in criteria):
        return None
    evidence = passed[criteria[0].text.strip()].evidence if criteria else o.answer or ""
    summary = (f"verified by code: {evidence}" if o.verified
               else "done, but not verified: " + "; ".join(o.unverified or ["no code check"]))
    return MergeVerdict(
        verdict="accept", summary=summary[:600],
        merged_output=o.answer or o.output,
        task_criteria_verdicts=[TaskCriterionJudgement(criterion=c.text, verdict="pass",
                                                       evidence=passed[c.text.strip()].evidence)
                                for c in criteria])


class MetaValidator:
    def __init__(self, client: BusClient, settings: Settings, llm: LLMClient | None = None):
        self.client = client
        self.settings = settings
        self._llm = llm
        self.store = TaskStateStore(settings, ROLE)
        self.tasks: dict[str, dict] = {}
        self.lock = threading.RLock()
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="metaval-eval")
        self._ended: dict[str, float] = {}
        # Several instances: a dead instance's fan-ins are taken over (resumed or ended)
        self.takeover = Takeover(client, settings, begins=("DispatchManifest",),
                                 ends=("FinalResult", "TaskCancel"), holds=self._holds,
                                 take_over=self._take_over, held=self._held,
                                 release=self._release)

    def register(self) -> None:
        c = self.client
        self.takeover.attach()   # first: a manifest is registered before on_manifest sees it
        c.on("DispatchManifest", self.on_manifest, ack=True, partition=True)
        c.on("SubTaskOutcome", self.on_outcome, ack=True, partition=True)
        c.on("TaskCancel", self.on_end, partition=True)
        c.on("FinalResult", self.on_end, partition=True)
        c.add_timer(1.0, self.expire)
        c.heartbeat_info = lambda: {"tasks": len(self.tasks), **self.takeover.info()}

    def expire(self) -> None:
        """Drop fan-ins of tasks past their deadline: their FinalResult went by while this
        instance was down or stopped, so on_end never ran for them."""
        now = time.time()
        with self.lock:
            limit = self.settings.task_deadline_s   # no manifest yet: the default deadline
            expired = [t for t, st in self.tasks.items()
                       if now > (st.get("deadline_at") or st["started_at"] + limit)
                       + EXPIRE_AFTER_DEADLINE_S]
        for task_id in expired:
            log.info("dropping the fan-in of %s: its deadline passed", task_id)
            self.on_end(None, SimpleNamespace(task_id=task_id))

    def resume(self) -> None:
        """Reload fan-ins of a killed predecessor; evaluate rounds that were complete."""
        for task_id, state in self.store.load_all(self.client.owns).items():
            self._resume_state(task_id, state)
        self.takeover.register_files(self.store.load_all(lambda t: not self.client.owns(t)))

    def _resume_state(self, task_id: str, state: dict, taken_over: bool = False) -> None:
        with self.lock:
            self.tasks[task_id] = state
        tasklog.append(self.settings.tasks_dir, task_id, "metaval_resumed",
                       plan_round=state.get("round"), taken_over=taken_over or None)
        state["evaluating_round"] = state.get("evaluated_round", -1)  # the evaluation died with us
        self._send_pending(state)
        self._maybe_evaluate(state)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    @property
    def llm(self) -> LLMClient:
        if self._llm is None:
            self._llm = LLMClient.for_role(ROLE, self.settings, bus=self.client)
        return self._llm

    # -- state -----------------------------------------------------------------------------------
    def _state(self, task_id: str) -> dict:
        state = self.tasks.get(task_id)
        if state is None:
            state = {"task_id": task_id, "round": -1, "subtask_ids": [], "criteria": [],
                     "intent": "", "intent_slug": "", "started_at": time.time(),
                     "deadline_at": 0.0, "outcomes": {}, "early": {}, "replans": 0,
                     "evaluated_round": -1, "evaluating_round": -1}
            self.tasks[task_id] = state
        return state

    # -- more than one instance (services/runtime/takeover.py) ----------------------------------
    def _holds(self, task_id: str) -> bool:
        """A fan-in with its manifest (early outcomes alone do not make a round)."""
        with self.lock:
            state = self.tasks.get(task_id)
            return task_id in self._ended or (state is not None and state["round"] >= 0)

    def _held(self) -> list[str]:
        with self.lock:
            return [t for t, st in self.tasks.items() if st["round"] >= 0]

    def _defer(self, task_id: str) -> bool:
        return not self._holds(task_id) and self.takeover.defer(task_id)

    def _take_over(self, begun: Begun) -> None:
        """The instance holding this task's fan-in is gone: resume the fan-in from its state file
        on this machine; else the outcomes it had acknowledged are lost and GGS ends the task."""
        state = self.store.load(begun.task_id)
        if state and state.get("task_id") == begun.task_id:
            self._resume_state(begun.task_id, state, taken_over=True)
            return
        msg = self.takeover.lost(begun, ROLE, "the outcomes of its plan round it had collected")
        tasklog.append(self.settings.tasks_dir, begun.task_id, "metaval_lost", reason=msg.reason)
        self.on_end(None, SimpleNamespace(task_id=begun.task_id))   # state file on this host too
        self.client.send(msg)

    def _release(self, task_id: str) -> None:
        """Its owner is back: forget the fan-in here (its state file stays, for the owner)."""
        with self.lock:
            self.tasks.pop(task_id, None)

    # -- handlers (loop thread; quick) -------------------------------------------------------------
    def on_manifest(self, env: Envelope, m: DispatchManifest) -> None:
        if self._defer(m.task_id):
            return DEFER
        with self.lock:
            if m.task_id in self._ended:
                return
            state = self._state(m.task_id)
            if m.plan_round < state["round"]:
                return  # a stale manifest re-sent late
            if m.plan_round > state["round"] or m.subtask_ids != state["subtask_ids"]:
                state.update(round=m.plan_round, subtask_ids=list(m.subtask_ids),
                             criteria=[c.model_dump() for c in m.task_criteria], outcomes={})
                if m.task_spec is not None:
                    state.update(intent=m.task_spec.intent, intent_slug=m.task_spec.intent_slug,
                                 deadline_at=m.task_spec.deadline_at,
                                 max_llm_calls=m.task_spec.options.max_llm_calls)
                    if m.task_spec.created_at:
                        state["started_at"] = min(state["started_at"], m.task_spec.created_at)
                early = state.pop("early", {})
                state["early"] = {}
                for sid, o in early.items():
                    if sid in state["subtask_ids"]:
                        state["outcomes"][sid] = o
            self.store.save(m.task_id, state)
            self._maybe_evaluate(state)

    def on_outcome(self, env: Envelope, o: SubTaskOutcome) -> None:
        if self._defer(o.task_id):
            return DEFER
        with self.lock:
            if o.task_id in self._ended:
                return
            state = self._state(o.task_id)
            if o.subtask_id in state["subtask_ids"]:
                if o.subtask_id in state["outcomes"]:
                    return  # the second copy (effector + dispatcher relay)
                state["outcomes"][o.subtask_id] = o.model_dump()
            elif o.plan_round > state["round"]:
                state["early"][o.subtask_id] = o.model_dump()  # before its manifest
            else:
                return  # an outcome of an older round
            self.store.save(o.task_id, state)  # persisted before the ack leaves
            self._maybe_evaluate(state)

    def on_end(self, env: Envelope, msg: FinalResult | TaskCancel) -> None:
        with self.lock:
            self.tasks.pop(msg.task_id, None)
            self._ended[msg.task_id] = time.time()
            if len(self._ended) > 20_000:
                for old in sorted(self._ended, key=self._ended.get)[:10_000]:
                    del self._ended[old]
        self.store.delete(msg.task_id)

    def _maybe_evaluate(self, state: dict) -> None:
        ids = state["subtask_ids"]
        rnd = state["round"]
        if (not ids or rnd < 0 or any(sid not in state["outcomes"] for sid in ids)
                or state["evaluated_round"] >= rnd or state["evaluating_round"] >= rnd):
            return
        state["evaluating_round"] = rnd
        self.pool.submit(self._evaluate_safely, state["task_id"], rnd)

    # -- evaluation (worker thread) ------------------------------------------------------------
    def _evaluate_safely(self, task_id: str, rnd: int) -> None:
        try:
            self._evaluate(task_id, rnd)
        except Exception as exc:  # never leave a complete round without a message
            log.exception("evaluation of %s round %d failed", task_id, rnd)
            with self.lock:
                state = self.tasks.get(task_id)
            if state is not None:
                outcomes = [SubTaskOutcome.model_validate(state["outcomes"][s])
                            for s in state["subtask_ids"] if s in state["outcomes"]]
                self._replan(state, rnd, outcomes, f"meta-validator error: {exc}", [], [])

    @telemetry.traced("merge", task=lambda self, task_id, rnd: task_id,
                      attrs=lambda self, task_id, rnd: {"artoo.plan_round": rnd})
    def _evaluate(self, task_id: str, rnd: int) -> None:
        with self.lock:
            state = self.tasks.get(task_id)
            if state is None or state["round"] != rnd:
                return
            outcomes = [SubTaskOutcome.model_validate(state["outcomes"][s])
                        for s in state["subtask_ids"]]
            criteria = [Criterion.model_validate(c) for c in state["criteria"]]
            intent = state["intent"]
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:  # hard gate: no LLM call
            gap = "; ".join(f"{o.intent or o.subtask_id}: {o.failure_reason or 'failed'}"
                            for o in failed)
            self._replan(state, rnd, outcomes, gap, [o.subtask_id for o in failed], [])
            return
        no_call = calls_left(self.settings, task_id, state.get("max_llm_calls")) == 0
        verdict = local_merge(outcomes, criteria) \
            if no_call or getattr(self.llm, "local", False) else None
        if verdict is None and no_call:
            # the budget is a bound for the merge too: without a call, only code may accept
            self._replan(state, rnd, outcomes, "the LLM call budget is spent: no call is left to "
                         "judge the merged result", [], [])
            return
        prompt = merge_prompt(intent, criteria, outcomes, self.settings.tool_output_chars * 2)
        try:
            verdict = verdict or self.llm.complete_json(MergeVerdict, SYSTEM_PROMPT, prompt,
                                                        task_id=task_id)
        except LLMError as exc:
            self._replan(state, rnd, outcomes, f"meta-validator LLM error: {exc}", [], [])
            return
        accepted, verdicts = check_accept(verdict, criteria)
        tasklog.append(self.settings.tasks_dir, task_id, "merge_verdict", plan_round=rnd,
                       verdict="accept" if accepted else "replan", llm_verdict=verdict.verdict,
                       summary=verdict.summary,
                       task_criteria_verdicts=[v.model_dump() for v in verdicts])
        if not accepted:
            failing = [v.criterion for v in verdicts if v.verdict == "fail"]
            gap = verdict.gap_summary.strip() or ("task criteria not met: " + "; ".join(failing)
                                                  if failing else "the merge did not accept")
            self._replan(state, rnd, outcomes, gap, [], verdicts)
            return
        merged = verdict.merged_output
        if merged is None or merged == "":
            merged = [o.output for o in outcomes] if len(outcomes) > 1 else outcomes[0].output
        msg = OutcomeSummary(task_id=task_id, intent=intent, intent_slug=state["intent_slug"],
                             summary=verdict.summary or "all task criteria met",
                             merged_output=merged, elapsed_ms=self._elapsed_ms(state),
                             outcomes=outcomes, task_criteria_verdicts=verdicts, plan_round=rnd)
        self._deliver(state, rnd, msg)

    def _replan(self, state: dict, rnd: int, outcomes: list[SubTaskOutcome], gap: str,
                failed_ids: list[str], verdicts: list[CriterionVerdict]) -> None:
        with self.lock:
            state["replans"] += 1
            count = state["replans"]
        recommendation = "abandon" if count >= self.settings.max_replans else "replan"
        corrections = sum(max(0, len(o.gap_trajectory) - 1) for o in outcomes)
        tasklog.append(self.settings.tasks_dir, state["task_id"], "replan", plan_round=rnd,
                       replan_round=count, gap_summary=gap, recommendation=recommendation,
                       failed_subtasks=failed_ids or None)
        msg = ReplanRequest(task_id=state["task_id"], intent=state["intent"],
                            intent_slug=state["intent_slug"], gap_summary=gap[:2000],
                            failed_subtasks=failed_ids, correction_count=corrections,
                            elapsed_ms=self._elapsed_ms(state), outcomes=outcomes,
                            task_criteria_verdicts=verdicts, recommendation=recommendation,
                            plan_round=rnd)
        self._deliver(state, rnd, msg)

    def _deliver(self, state: dict, rnd: int, msg: ReplanRequest | OutcomeSummary) -> None:
        """Send the verdict to GGS; it stays in the persisted state until GGS acknowledged it, so a
        restarted instance re-sends it rather than losing it."""
        task_id = state["task_id"]
        with self.lock:
            if task_id in self._ended or self.tasks.get(task_id) is not state:
                return
            state["evaluated_round"] = rnd
            state["pending"] = {"type": type(msg).__name__, "body": msg.model_dump()}
            self.store.save(task_id, state)
        self._send_pending(state, msg)

    def _send_pending(self, state: dict, msg: ReplanRequest | OutcomeSummary | None = None
                      ) -> None:
        """Send the persisted verdict: `msg` itself when the caller has it, else (a restart) the
        message rebuilt from the state."""
        pending = state.get("pending")
        if not pending:
            return
        if msg is None:
            model = ReplanRequest if pending["type"] == "ReplanRequest" else OutcomeSummary
            msg = model.model_validate(pending["body"])
        task_id = state["task_id"]

        def delivered(ok: bool) -> None:
            with self.lock:
                if ok and self.tasks.get(task_id) is state and state.get("pending") is pending:
                    state.pop("pending", None)
                    self.store.save(task_id, state)

        self.client.send(msg, on_done=delivered)  # consumer: ggs (acked, re-sent until it is)

    @staticmethod
    def _elapsed_ms(state: dict) -> float:
        return round((time.time() - state["started_at"]) * 1000, 1)


def setup(client: BusClient, settings: Settings) -> MetaValidator:
    mv = MetaValidator(client, settings)
    try:  # build the LLM client now (and warm the SDK), not on the first task
        mv.llm
    except LLMError as exc:
        log.warning("LLM not configured yet: %s", exc)
    mv.register()
    mv.resume()
    return mv


def main() -> int:
    return run_role(ROLE, setup)


if __name__ == "__main__":
    raise SystemExit(main())
