"""R1 Perceiver: a UserRequest becomes a TaskSpec (or, for a greeting, a ConversationalReply).

* The run id comes from the CLI (assigned in code, unique per run); the perceiver never invents ids.
* The intent slug, the memory tag, is derived in code from the user's own words (normalised keywords),
  so rerunning the same goal gets the same slug whatever the LLM paraphrases this time.
* Relative dates stay verbatim: the prompt says so and a code guard falls back to the user's words
  when the LLM resolved "yesterday" into a date anyway.
* Clarification: at most `clarification_rounds` questions, only when an operator is present; then one
  final call told to proceed, and if it still asks, the raw request itself becomes the intent (the Go
  reference published an empty TaskSpec there). A question unanswered for `clarification_timeout_s`
  is treated as "do your best", so no task waits on an absent operator.
* The conversational fast path is decided in code and only for whole-input greetings and identity
  questions, never for anything that might need a tool or live data (digest §2.1, risk 15).
  The run then ends with the ConversationalReply: no TaskSpec, no GGS, no FinalResult.
* An LLM failure does not stop the task: the raw request becomes the intent, and the planner (or GGS,
  through PlanningFailed) reports honestly what could not be done.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from pydantic import BaseModel, Field

from protocol.bus import DEFER, BusClient
from protocol.envelope import Envelope
from protocol.messages import (ClarificationReply, ClarificationRequest, ConversationalReply,
                               EmotionVector, Referent, TaskConstraints, TaskLost, TaskSpec,
                               UserRequest, WorldQuery)
from protocol.settings import Settings

from services.runtime import tasklog, telemetry, world
from services.safety import referents
from services.runtime.llm import LLMClient, LLMError
from services.runtime.role import run_role
from services.runtime.takeover import Begun, Takeover
from services.runtime.taskstate import EXPIRE_AFTER_DEADLINE_S, TaskStateStore

ROLE = "perceiver"
log = logging.getLogger("artoo.perceiver")

# ---------------------------------------------------------------------------------------------
# pure logic: the fast path, the slug, the relative-date guard
# ---------------------------------------------------------------------------------------------

GREETINGS = (
    "hi", "hello", "hey", "yo", "howdy", "hiya", "greetings", "good morning", "good afternoon",
    "good evening", "good night", "thanks", "thank you", "thanks a lot", "thank you very much",
    "cheers", "bye", "goodbye", "see you", "ok thanks", "nice to meet you",
    "你好", "您好", "嗨", "早上好", "下午好", "晚上好", "谢谢", "再见",
)
IDENTITY = (
    "who are you", "what are you", "what is your name", "what's your name", "whats your name",
    "introduce yourself", "tell me about yourself", "what can you do", "how are you",
    "你是谁", "你叫什么", "你叫什么名字", "介绍一下你自己", "自我介绍", "你能做什么",
)
# Words that may follow a greeting without turning it into a request ("hi there", "thanks artoo").
FILLERS = {"there", "world", "artoo", "again", "all", "everyone", "friend", "buddy", "mate", "so", "much",
           "very", "a", "lot"}
_PUNCT = re.compile(r"[\s!?.,;:~，。！？、…'\"“”]+")


def _normalise(text: str) -> str:
    return _PUNCT.sub(" ", text.lower()).strip()


def is_conversational(text: str) -> bool:
    """True only when the whole input is a greeting and/or an identity question.

    Anything else, even a short question ("what time is it", "what's the weather"), goes through the
    full pipeline, because answering it honestly may need a tool or live data."""
    norm = _normalise(text)
    if not norm or len(norm) > 80:
        return False
    rest = f" {norm} "
    matched = False
    # Longest phrases first, so "thank you very much" is consumed whole.
    for phrase in sorted(GREETINGS + IDENTITY, key=len, reverse=True):
        p = _normalise(phrase)
        if p.isascii():
            pattern = f" {p} "
            while pattern in rest:
                rest = rest.replace(pattern, " ", 1)
                matched = True
        elif p in rest:
            rest = rest.replace(p, " ")
            matched = True
    leftover = [w for w in rest.split() if w not in FILLERS]
    return matched and not leftover


_STOPWORDS = frozenset("""
a an the and or but of to in on at by for with from into onto about as is are was were be been being
do does did done doing have has had having i me my mine we us our you your yours it its this that these
those there here please kindly can could would should will shall may might must just also then than
so very really some any all each every which what who whom whose how when where why if whether not no
yes up down out over under again further once only own same too s t now get got let lets make sure
tell show give want need like help me
""".split())
_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]+")


def _singular(word: str) -> str:
    """Plural to singular, and only that: 'files'/'file' agree, and the slug stays plain words
    ('shipped', 'status', 'listing' — a stemmer made them 'shipp', 'statu', 'list')."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is", "ys")):
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"),
                         ("shes", "sh")):
        if word.endswith(suffix):
            return word[: -len(suffix)] + keep
    return word[:-1]


def intent_slug(text: str, max_words: int = 8) -> str:
    """A stable memory tag for an intent: sorted, de-duplicated keywords of the user's words.

    Sorting makes it insensitive to word order; the user's text (not the LLM's paraphrase) is the
    input, so the same goal always gets the same slug."""
    words = _WORD.findall(text.lower())
    keys = sorted({_singular(w) for w in words if w not in _STOPWORDS and (len(w) > 1 or w.isdigit())})
    if not keys:
        return "task-" + hashlib.sha1(_normalise(text).encode()).hexdigest()[:8]
    slug = "-".join(keys[:max_words])
    return slug[:80].strip("-")


_RELATIVE = re.compile(
    r"\b(today|tonight|yesterday|tomorrow|this (?:week|month|year|morning|evening)|"
    r"last (?:week|month|year|night|\w+day)|next (?:week|month|year|\w+day)|recent(?:ly)?|"
    r"(?:\d+|a|one|two|three) (?:days?|weeks?|months?|years?) ago|now)\b"
    r"|今天|昨天|明天|前天|今年|去年|本周|上周|最近|本月|上个月", re.I)
_ABSOLUTE = re.compile(r"\b(?:19|20)\d{2}(?:[-/.]\d{1,2}(?:[-/.]\d{1,2})?)?\b|\d{4}年")


def resolved_relative_dates(raw: str, intent: str) -> bool:
    """True when the raw input speaks in relative time and the intent introduced a date the user
    never wrote: the LLM resolved a relative date, which R1 must not do (the planner does, with
    today's date in its prompt)."""
    if not _RELATIVE.search(raw):
        return False
    raw_dates = set(_ABSOLUTE.findall(raw))
    return any(d not in raw_dates for d in _ABSOLUTE.findall(intent))


# ---------------------------------------------------------------------------------------------
# the LLM contract
# ---------------------------------------------------------------------------------------------

class Perception(BaseModel):
    """What the perceiver asks the LLM for."""
    needs_clarification: bool = False
    question: str = ""
    intent: str = ""
    success_criteria: list[str] = Field(default_factory=list)
    scope: Optional[str] = None
    deadline: Optional[str] = None
    constraints: list[str] = Field(default_factory=list)


SYSTEM_PROMPT = """You are the Perceiver of artoo, an agent that gets tasks done on the user's machine with tools.
Turn the user's request into a task specification. Reply with only JSON:
{"needs_clarification": false, "question": "", "intent": "<one action-oriented sentence>",
 "success_criteria": ["<observable condition showing the goal is met>"],
 "scope": null, "deadline": null, "constraints": ["<other constraint the user stated>"]}
Rules:
- Keep relative time words (today, yesterday, this week, recently, 昨天 ...) verbatim. Never turn them into dates.
- Use the session history to resolve references ("it", "that file", "again", "in Chinese") without asking.
- Ask (needs_clarification true, one short question) only when the request cannot be acted on at all
  without the answer; otherwise proceed with the most reasonable interpretation.
- Do not answer the request yourself and do not invent facts; the other agents will do the work."""

FINAL_CALL = ("Do not ask any more questions: proceed with your best interpretation and return the "
              "task specification.")
CONVERSATIONAL_PROMPT = ("You are artoo, a local task agent that plans and runs tasks with tools on "
                         "the user's machine. Answer the greeting or question about yourself in one "
                         "or two short sentences, in the user's language. Plain text, no JSON.")
CANNED_REPLY = ("Hello! I'm artoo, a local task agent: give me a goal and I'll plan it, run it with "
                "tools on this machine and report what actually happened.")


def build_prompt(request: UserRequest, qa: list[dict], final: bool, world_text: str = "") -> str:
    parts = []
    if world_text:
        parts.append(world_text)
    if request.history:
        parts.append("Recent session history:\n" + "\n".join(request.history[-5:]))
    parts.append(f"Request: {request.text}")
    for item in qa:
        parts.append(f"Clarification Q: {item['question']}\nA: {item['answer'] or '(no answer)'}")
    if final:
        parts.append(FINAL_CALL)
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------------
# the role
# ---------------------------------------------------------------------------------------------

class Perceiver:
    def __init__(self, client: BusClient, settings: Settings, llm: LLMClient | None = None):
        self.client = client
        self.settings = settings
        self._llm = llm
        self.lock = threading.Lock()
        self.store = TaskStateStore(settings, ROLE)
        self.pending: dict[str, dict] = {}      # task -> {request, qa, round, asked_at, ...}
        self.done: dict[str, float] = {}         # tasks already turned into a TaskSpec/reply
        self.kept: dict[str, float] = {}         # task -> deadline: its TaskSpec kept on disk
        self.restored: set[str] = set()          # of those, kept before a restart
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="perceiver-expire")
        # When the world process last heartbeat. Until one arrives the perceiver cannot tell a
        # world that is down from one not heard yet (it beats once a second; `artoo up` returns
        # before this process need have heard it), so for its first `missing_after_s` it asks.
        self.world_seen = time.monotonic()
        # Several instances: a question a dead instance was waiting on is taken over
        self.takeover = Takeover(client, settings, begins=("ClarificationRequest",),
                                 ends=("TaskSpec", "ConversationalReply", "FinalResult",
                                       "TaskCancel"),
                                 holds=self._holds, take_over=self._take_over,
                                 held=lambda: list(self.pending), release=self._release)

    def register(self) -> None:
        c = self.client
        c.on("UserRequest", self.on_request, ack=True, partition=True, threaded=True)
        c.on("ClarificationReply", self.on_clarification, ack=True, partition=True, threaded=True)
        c.on("TaskCancel", self.on_end, partition=True)
        c.on("FinalResult", self.on_end, partition=True)
        c.on("Heartbeat", self._world_beat, task="world")   # is the world process up?
        c.add_timer(1.0, self.expire_questions)
        c.heartbeat_info = lambda: {"pending_clarifications": len(self.pending),
                                    **self.takeover.info()}
        self.takeover.attach()

    def resume(self) -> None:
        """Reload clarifications that were waiting for the operator when we were killed, and the
        TaskSpecs sent for tasks not yet ended (a re-delivered request is answered from them)."""
        for task, state in self.store.load_all(self.client.owns).items():
            if "spec" in state:
                self.done[task] = float(state.get("perceived_at") or time.time())
                self.kept[task] = (float(state.get("deadline_at") or 0)
                                   or time.time() + self.settings.task_deadline_s)
                self.restored.add(task)
            else:
                self.pending[task] = state
                if state.get("question") and len(state.get("qa", [])) < state.get("round", 0):
                    self._ask(state)   # saved, then killed maybe before the question left
        self.takeover.register_files({
            t: st for t, st in self.store.load_all(lambda t: not self.client.owns(t)).items()
            if "spec" not in st})

    @property
    def llm(self) -> LLMClient:
        if self._llm is None:
            self._llm = LLMClient.for_role(ROLE, self.settings, bus=self.client)
        return self._llm

    # -- handlers ------------------------------------------------------------------------------
    def on_request(self, env: Envelope, req: UserRequest) -> None:
        task = req.task_id
        with self.lock:
            seen = task in self.done or task in self.pending
            restored = task in self.restored
            self.restored.discard(task)
        if seen:    # a re-delivery (we may have been restarted mid-handling)
            if restored:
                self._send_again(task)
            return
        if self._began_before(task):
            return
        now = time.time()
        deadline_s = req.options.deadline_s or self.settings.task_deadline_s
        state = {"task_id": task, "request": req.model_dump(), "qa": [], "round": 0,
                 "created_at": now, "deadline_at": now + deadline_s}
        self._or_end(task, (lambda: self._converse(req)) if is_conversational(req.text)
                     else (lambda: self._perceive(state)))

    def _send_again(self, task: str) -> None:
        """A request re-delivered after a restart for a task perceived before it: the sender
        never heard our ack. The TaskSpec is sent again as it was, under its message id, not
        perceived anew (a second perception re-armed GGS with a new deadline and could word the
        intent differently from the plan's); the planner and GGS take the copy as they took the
        first. The decision log says whether the task has ended meanwhile: then nothing is sent
        (a restarted planner would plan it again)."""
        if tasklog.kinds_logged(self.settings.tasks_dir, task, tasklog.ENDED):
            self.store.delete(task)
            return
        state = self.store.load(task) or {}
        try:
            spec = TaskSpec.model_validate(state["spec"])
        except (KeyError, ValueError) as exc:
            log.warning("the TaskSpec kept for %s is unreadable (%s); not sent again", task, exc)
            return
        tasklog.append(self.settings.tasks_dir, task, "perceiver_resent")
        self.client.send(spec, msg_id=state.get("spec_msg_id"))

    def _ask(self, state: dict) -> None:
        """The question of `state`, under the id it was first sent with: sent again after a
        restart (the operator's client acks a copy it holds without asking twice)."""
        self.client.send(ClarificationRequest(task_id=state["task_id"], question=state["question"],
                                              round=state["round"]),
                         msg_id=state.get("question_msg_id"))

    def _began_before(self, task: str) -> bool:
        """A request for a task the decision log says was perceived (or ended) before, which this
        process does not remember and keeps no TaskSpec of: its memory went with a restart and
        the kept TaskSpec with the task's end (or its write failed). Perceived again, the goal
        would run a second time — so it is not; the sender has its ack."""
        began = tasklog.kinds_logged(self.settings.tasks_dir, task, tasklog.BEGUN)
        if began:
            log.info("request for %s not perceived again: its decision log has %s", task,
                     ", ".join(sorted(began)))
        return bool(began)

    def _or_end(self, task: str, step) -> None:
        """No request may hang on a fault of ours: a step that raises (a bug, a disk error)
        ends the task at once — GGS sends its FinalResult on the TaskLost — instead of leaving
        the sender waiting for the deadline with the request acknowledged as handled."""
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - reported on the bus and in the task log
            log.exception("perceiving %s failed", task)
            with self.lock:
                self.pending.pop(task, None)
                self.done[task] = time.time()
            self.store.delete(task)
            why = f"the perceiver failed on this request ({type(exc).__name__}: {exc})"
            try:
                tasklog.append(self.settings.tasks_dir, task, "perceiver_failed", error=why)
            except OSError:
                pass
            self.client.send(TaskLost(task_id=task, role=ROLE, lost_where=self.client.node,
                                      reason=f"{why}; the task cannot continue"))

    # -- more than one instance (services/runtime/takeover.py) ----------------------------------
    def _holds(self, task_id: str) -> bool:
        with self.lock:
            return task_id in self.pending or task_id in self.done

    def _take_over(self, begun: Begun) -> None:
        """The instance that asked the question is gone: its state file on this machine keeps
        the request and the question (the answer still finds it), else GGS ends the task."""
        state = self.store.load(begun.task_id)
        if state and state.get("task_id") == begun.task_id and "spec" not in state:
            with self.lock:
                self.pending[begun.task_id] = state
            tasklog.append(self.settings.tasks_dir, begun.task_id, "perceiver_resumed",
                           round=state.get("round"))
            return
        msg = self.takeover.lost(begun, ROLE, "the request and the clarification it was waiting for")
        with self.lock:
            self.done[begun.task_id] = time.time()
        self.store.delete(begun.task_id)
        tasklog.append(self.settings.tasks_dir, begun.task_id, "perceiver_lost", reason=msg.reason)
        self.client.send(msg)

    def _release(self, task_id: str) -> None:
        with self.lock:
            self.pending.pop(task_id, None)

    def on_clarification(self, env: Envelope, reply: ClarificationReply) -> None:
        task = reply.task_id
        with self.lock:
            state = self.pending.get(task) or self.store.load(task)
            if state is None and task not in self.done and self.takeover.defer(task):
                return DEFER  # the question is another (missing) instance's
            if state is None or "spec" in state or task in self.done:   # spec: perceived
                log.info("clarification reply for unknown or finished task %s ignored", task)
                return
            if reply.round != state["round"] or len(state["qa"]) >= state["round"]:
                return  # stale or duplicate answer
            state["qa"].append({"question": state.get("question", ""), "answer": reply.answer})
        tasklog.append(self.settings.tasks_dir, task, "clarification_reply", round=reply.round,
                       answer=reply.answer)
        self._or_end(task, lambda: self._perceive(state))

    def expire_questions(self) -> None:
        """Timer: a question the operator left unanswered becomes "proceed as best you can";
        a kept TaskSpec whose task's FinalResult went by while we were down or stopped is
        dropped once the deadline is past (GGS ends every task by then)."""
        now = time.time()
        limit = now - self.settings.clarification_timeout_s
        with self.lock:
            gone = [t for t, deadline in self.kept.items()
                    if now > deadline + EXPIRE_AFTER_DEADLINE_S]
            for task in gone:
                del self.kept[task]
                self.restored.discard(task)
        for task in gone:
            self.store.delete(task)
        with self.lock:
            expired = [s for s in self.pending.values()
                       if s.get("asked_at", 0) < limit and len(s["qa"]) < s["round"]]
            for state in expired:
                state["qa"].append({"question": state.get("question", ""), "answer": ""})
                state["round"] = self.settings.clarification_rounds  # ask no more
        for state in expired:
            tasklog.append(self.settings.tasks_dir, state["task_id"], "clarification_reply",
                           round=state["round"], answer="", timed_out=True)
            self.pool.submit(self._or_end, state["task_id"], lambda s=state: self._perceive(s))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def on_end(self, env: Envelope, msg) -> None:
        task = msg.task_id
        with self.lock:
            self.pending.pop(task, None)
            self.done.pop(task, None)
            self.kept.pop(task, None)
            self.restored.discard(task)
        self.store.delete(task)

    # -- work ----------------------------------------------------------------------------------
    @telemetry.traced("converse", task=lambda self, req: req.task_id)
    def _converse(self, req: UserRequest) -> None:
        tasklog.append(self.settings.tasks_dir, req.task_id, "task_begin", intent=req.text,
                       raw_input=req.text, path="conversational")
        try:
            answer = self.llm.complete_text(CONVERSATIONAL_PROMPT, req.text, task_id=req.task_id,
                                            max_tokens=120) or CANNED_REPLY
        except LLMError as exc:
            log.warning("conversational reply fell back to the canned answer: %s", exc)
            answer = CANNED_REPLY
        with self.lock:
            self.done[req.task_id] = time.time()
        tasklog.append(self.settings.tasks_dir, req.task_id, "task_end", status="conversational",
                       summary=answer)
        self.client.send(ConversationalReply(task_id=req.task_id, answer=answer))

    @telemetry.traced("perceive", task=lambda self, state: state["task_id"],
                      attrs=lambda self, state: {"artoo.clarification_round": state["round"]})
    def _perceive(self, state: dict) -> None:
        req = UserRequest.model_validate(state["request"])
        if "referents" not in state:     # resolved in code once, before any model call
            ws = req.options.workspace or str(self.settings.workspace)
            state["referents"] = [r.as_dict() for r in referents.resolve(req.text, ws)]
        if "world" not in state:         # asked once, before any model call
            state["world"], state["world_note"] = self._projection(req)
            recalled(state["referents"], state["world"], req.text)
        task = req.task_id
        max_rounds = self.settings.clarification_rounds
        may_ask = req.options.interactive and state["round"] < max_rounds
        final = not may_ask
        error = ""
        missing = referents.decisive(req.text, referents.coerce(state["referents"]))
        if missing or (getattr(self.llm, "local", False) and not req.history and not may_ask):
            # A goal that reads what the workspace lacks ends not_possible in code: no model.
            # The bundled model's paraphrase lost the goal's conditions ("the Norwegian cities"
            # became "the cities") and cost ~17 s: the user's own words are the spec.
            got = Perception()
        else:
            try:
                got = self.llm.complete_json(Perception, SYSTEM_PROMPT,
                                             build_prompt(req, state["qa"], final,
                                                          state.get("world", "")),
                                             task_id=task)
            except LLMError as exc:
                error = str(exc)
                got = Perception()
        if got.needs_clarification and got.question.strip() and may_ask:
            state["round"] += 1
            state["question"] = got.question.strip()
            state["asked_at"] = time.time()
            state["question_msg_id"] = self.client.new_id()
            with self.lock:
                self.pending[task] = state
            self.store.save(task, state)
            tasklog.append(self.settings.tasks_dir, task, "clarification", round=state["round"],
                           question=state["question"])
            self._ask(state)
            return
        spec = self._spec(req, state, got, error)
        spec.referents = state_referents(state)
        self._world(spec, req, state)
        with self.lock:
            self.pending.pop(task, None)
            self.done[task] = time.time()
            if len(self.done) > 10_000:  # bounded memory of finished ids
                for old in sorted(self.done, key=self.done.get)[:5_000]:
                    del self.done[old]
        # kept until the task ends (on_end): a request re-delivered after a restart is answered
        # with this TaskSpec, under this id, instead of a second perception (_send_again)
        msg_id = self.client.new_id()
        self.store.save(task, {"task_id": task, "deadline_at": spec.deadline_at,
                               "perceived_at": time.time(), "spec_msg_id": msg_id,
                               "spec": spec.model_dump(mode="json")})
        with self.lock:
            self.kept[task] = spec.deadline_at
        tasklog.append(self.settings.tasks_dir, task, "task_begin", intent=spec.intent,
                       intent_slug=spec.intent_slug, raw_input=spec.raw_input,
                       success_criteria=spec.success_criteria, deadline_at=spec.deadline_at,
                       perceiver_error=error or None, workspace=req.options.workspace or None,
                       referents=[r.model_dump() for r in spec.referents] or None)
        self.client.send(spec, msg_id=msg_id)  # consumers: planner + ggs (GGS arms the deadline)

    def _world_beat(self, env: Envelope, msg) -> None:
        self.world_seen = time.monotonic()

    def _projection(self, req: UserRequest) -> tuple[str, dict]:
        """The world model's projection for the goal: a request with a short timeout, made only
        while the world process heartbeats; without it the task goes on without one."""
        s = self.settings
        if not s.world_on:
            return "", {"world_error": "off"}
        if time.monotonic() - self.world_seen > s.missing_after_s:
            return "", {"world_error": "no projection: the world process is not running"}
        try:
            ws = req.options.workspace or str(s.workspace)
            _, res = self.client.request(WorldQuery(op="project", text=req.text, workspace=ws,
                                                    task_id=req.task_id),
                                         to="world", timeout=s.world_query_timeout_s)
        except Exception as exc:          # the world is optional: never stop a task for it
            return "", {"world_error": f"no projection: {exc}"[:200]}
        note = {"world_facts": len(res.facts), "world_entities": len(res.entities),
                "world_error": res.error or None}
        return (res.text[:s.world_projection_chars] if res.ok else ""), note

    def _world(self, spec: TaskSpec, req: UserRequest, state: dict) -> None:
        """Seed 002 in the TaskSpec: the message's emotion and the goal's priority (code), and
        the world's projection (taken before the model call, in `state`)."""
        s = self.settings
        emo = world.detect_emotion(req.text)
        spec.emotion = EmotionVector(**emo.as_dict())
        session = req.session_id or ""
        if session.startswith("goal:"):
            spec.goal_type = "AUTO" if session.startswith("goal:a-") else "REACTIVE"
        spec.priority = round(world.priority(
            spec.goal_type, time.time(), deadline=world.stated_deadline(req.text),
            valence=emo.valence, arousal=emo.arousal, alpha=s.priority_alpha,
            beta=s.priority_beta, gamma=s.priority_gamma), 4)
        spec.world = state.get("world", "")
        tasklog.append(s.tasks_dir, req.task_id, "world", emotion=emo.as_dict(),
                       priority=spec.priority, **(state.get("world_note") or {}))

    def _spec(self, req: UserRequest, state: dict, got: Perception, error: str) -> TaskSpec:
        raw = req.text
        if state["qa"]:
            raw += "".join(f"\nClarification: Q: {q['question']} A: {q['answer'] or '(none)'}"
                           for q in state["qa"])
        intent = " ".join(got.intent.split())
        if not intent or resolved_relative_dates(req.text, intent):
            intent = " ".join(raw.split())  # the user's own words are always an honest intent
        return TaskSpec(
            task_id=req.task_id, intent_slug=intent_slug(req.text), intent=intent,
            success_criteria=[c for c in got.success_criteria if c.strip()],
            constraints=TaskConstraints(scope=got.scope, deadline=got.deadline,
                                        other=[c for c in got.constraints if c.strip()]),
            raw_input=raw, created_at=state["created_at"], deadline_at=state["deadline_at"],
            options=req.options)


def recalled(refs: list[dict], world_text: str, goal: str = "") -> None:
    """A thing the goal reads that the workspace lacks but the world's projection names (a file
    an earlier session read, since removed) is `recalled`, not missing: the goal may ask what
    was known of it ("the code you read from secret.txt last time"), so its absence no longer
    makes the goal not_possible in code. The model then works from the projection, and Law 0
    cannot verify what no input holds. A file named after "in" is read when it exists, else
    made (referents._role): one the world knows exists for the goal, so it is read ("the lines
    you counted in data/log.txt earlier" was a file to make, and its absence a failure)."""
    if not world_text:
        return
    words = set(re.findall(r"[\w./@-]+", world_text.lower()))
    either = {r.text.lower() for r in referents.extract(goal) if r.role == "in"}
    for ref in refs:
        text = str(ref.get("text", "")).lower().strip("/")
        if ref.get("status") == "missing" and text in words:
            ref["status"] = "recalled"
            if text in either:
                ref["role"] = "read"


def state_referents(state: dict) -> list[Referent]:
    return [Referent.model_validate(d) for d in state.get("referents") or []]


def setup(client: BusClient, settings: Settings) -> Perceiver:
    perceiver = Perceiver(client, settings)
    try:  # build the LLM client now (and warm the SDK), not on the first task
        perceiver.llm
    except LLMError as exc:
        log.warning("LLM not configured yet: %s", exc)
    perceiver.register()
    perceiver.resume()
    return perceiver


def main() -> int:
    return run_role(ROLE, setup)


if __name__ == "__main__":
    raise SystemExit(main())
