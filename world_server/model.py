"""The world model (seed 002 Def. 2): what the `world` process learns from the bus, and its queries.

Sources, in the order a task sends them:
* UserRequest — an episode: the user's words, their emotion (Def. 3), the entities they name
  (tracked with the message's valence as sentiment), what they said a name or value is (a fact of
  what the user said), a deadline they stated; a negative, aroused message proposes a REACTIVE goal.
* TaskSpec — the intent slug (the repetition trigger counts it), the referents resolved in code, a
  USER goal with its priority.
* SubTaskOutcome — the task's tool records (files written and read, settings read from them).
* FinalResult — closes the episode (Law 0): a file a successful tool call wrote becomes a fact
  only when code finds it in the task's workspace (its size and digest are the evidence); a
  setting read by a successful call is a fact of that file; the answer is a fact only when the
  FinalResult is verified, otherwise a claim with its status, never shown as a fact (an
  `unverified` answer — done, but no check confirmed it — is projected marked as such: the user
  refers to what they were told).
SYSTEM goals come from the runtime's own state, observed by code: a schedule whose last runs all
failed (→ pause it), ARTOO_HOME grown past a bound (→ a report of what takes the room).
Proposals (AUTO, SYSTEM, REACTIVE) never run by themselves: they wait in the goals table, BLOCKED on the
operator (Law 1), until `artoo goals accept` (→ PENDING/ACTIVE) or `reject` (→ REJECTED).
"""
from __future__ import annotations

import hashlib
import heapq
import logging
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from protocol.settings import Settings
from services.runtime import world as W
from services.runtime import worldfacts as X
from services.runtime.disk import tree_size

from .index import FAILED, FactMeta, name_words
from .store import (MAX_INTENT_HISTORY, WorldError, WorldStore, held, known_at, stable_id,
                    valid_at)

log = logging.getLogger("artoo.world")
PLACE_BONUS = 1.0           # a related fact found in the goal's workspace (projection rank)
FACT_RECENCY_S = 86400.0       # a fact's recency bonus in the projection decays over a day
MAX_CALLS_KEPT = 60            # tool records kept per open episode


def _when(ts: Optional[float]) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def fact_rank(f: FactMeta, shared: int, ids: dict, ws: str, now: float) -> float | None:
    """A fact's rank in the projection for a goal it shares `shared` words with, the related
    entities being `ids` (id → how related); None when it is not shown for that goal."""
    if not f.shown or f.forgotten or not held(f.valid_at, f.invalid_at, now) or \
            f.scope not in ("", ws):
        return None
    if not f.scope and not shared and f.subject not in ids:
        return None       # a global fact (what the user said) must share the goal's words;
        #                   a workspace's own facts are related to a goal there by place
    # a fact about a related entity counts as much as the entity is related (a goal naming
    # "port" is half about "staging port"); a fact of the goal's own workspace that shares its
    # words outranks a global one that shares as many: "the port you found" there is the port
    # found there, not one the user named for another project
    return 0.5 * shared + ids.get(f.subject, 0.0) + \
        (PLACE_BONUS if shared and f.scope == ws else 0.0) + \
        W.recency(now, f.valid_at, FACT_RECENCY_S)


def _name(eid: str) -> str:
    return eid.split(":", 1)[1] if ":" in eid else eid


class WorldModel:
    def __init__(self, store: WorldStore, settings: Settings):
        self.store = store
        self.s = settings

    # -- formulas with this deployment's settings ------------------------------------------------
    def weight(self, ent: dict, now: float) -> float:
        s = self.s
        return W.context_weight(now, ent, stale_after_s=s.world_stale_after_s,
                                alpha_r=s.world_alpha_r, alpha_f=s.world_alpha_f,
                                tau_s=s.world_tau_s, cap=s.world_mention_cap)

    def entity_view(self, ent: dict, now: float) -> dict:
        s = self.s
        return {**ent, "state": W.lifecycle(now, ent["last_mentioned"], s.world_stale_after_s),
                "importance": round(W.importance(
                    now, ent["last_mentioned"], ent["mentions"], alpha_r=s.world_alpha_r,
                    alpha_f=s.world_alpha_f, tau_s=s.world_tau_s, cap=s.world_mention_cap), 4)}

    # -- sources ---------------------------------------------------------------------------------
    def on_request(self, task: str, text: str, *, session: str = "", workspace: str = "",
                   at: Optional[float] = None) -> list[dict]:
        """An episode begins. Returns the goals it proposed."""
        at = time.time() if at is None else at
        emo = W.detect_emotion(text)
        mentions = X.mentions(text)
        said = X.user_statements(text)
        deadline = W.stated_deadline(text, at)
        proposals: list[dict] = []

        def tx(txn):
            st = self.store
            old = st.get(txn, "episodes", task)
            if old is not None and old.get("requested"):
                return                                   # a re-delivered request
            ep = {"task": task, "text": text[:2000], "at": at, "session": session,
                  "workspace": workspace, "emotion": emo.as_dict(), "slug": "", "calls": [],
                  "outcomes": 0, "final": None, "mentions": [m.id for m in mentions],
                  "requested": True}
            if old is not None:                          # its TaskSpec came first
                ep.update(slug=old.get("slug", ""), intent=old.get("intent", ""),
                          calls=old.get("calls", []), outcomes=old.get("outcomes", 0),
                          final=old.get("final"), workspace=workspace or old.get("workspace"),
                          spec=old.get("spec", False), outcome_keys=old.get("outcome_keys", []))
            st.put(txn, "episodes", task, ep)
            for m in mentions:
                st.track(txn, m.id, m.kind, m.name, at=at, sentiment=emo.valence, episode=task,
                         lam=self.s.world_ema_lambda)
            for stmt in said:
                kind = stmt.subject.split(":", 1)[0]
                st.track(txn, stmt.subject, kind, _name(stmt.subject), at=at,
                         sentiment=emo.valence, episode=task, lam=self.s.world_ema_lambda)
                st.assert_fact(txn, stmt.subject, stmt.predicate, stmt.value,
                               stmt.said, status="user_said", valid_at=at,
                               episode={"task": task, "evidence": f"user message: {stmt.text}",
                                        "at": at})
            if deadline:
                st.put(txn, "deadlines", task, {"task": task, "text": text[:300],
                                                "deadline": deadline, "fired": False})
            if self.s.world_on and not session.startswith(("schedule:", "goal:")) and \
                    W.negative_state(emo.valence, emo.arousal, self.s.world_neg_valence,
                                     self.s.world_arousal):
                proposals.append(self._reactive(txn, task, text, emo, at, workspace))
        self.store.transact(tx)
        return [p for p in proposals if p]

    def on_spec(self, spec: dict) -> list[dict]:
        """The perceiver's TaskSpec: the USER goal, the slug, the referents; repetition trigger."""
        task, now = spec["task_id"], time.time()
        proposals: list[dict] = []

        def tx(txn):
            st = self.store
            ep = st.get(txn, "episodes", task) or {
                "task": task, "text": spec.get("raw_input", "")[:2000], "at": now,
                "session": "", "workspace": "", "emotion": None, "calls": [], "outcomes": 0,
                "final": None, "mentions": []}
            if ep.get("slug") or ep.get("spec"):
                return                                   # a re-delivered (or replayed) TaskSpec
            ep["spec"] = True
            ep["slug"] = spec.get("intent_slug", "")
            ep["intent"] = spec.get("intent", "")
            ep["workspace"] = spec.get("options", {}).get("workspace") or ep.get("workspace") \
                or str(self.s.workspace)
            for ref in spec.get("referents") or []:
                if ref.get("kind") in ("file", "folder") and ref.get("status") == "found":
                    m = X.entity_id(ref["kind"], (ref.get("where") or [ref["text"]])[0])
                    if m not in ep["mentions"]:
                        st.track(txn, m, ref["kind"], _name(m), at=now, sentiment=None,
                                 episode=task, lam=self.s.world_ema_lambda)
            st.put(txn, "episodes", task, ep)
            st.put(txn, "goals", f"u-{task}", {
                "id": f"u-{task}", "type": spec.get("goal_type") or "USER",
                "description": spec.get("intent", "")[:300], "status": "ACTIVE",
                "priority": spec.get("priority", 0.5), "trigger": "the user asked",
                "evidence": [], "action": {}, "created_at": now, "task_id": task,
                "emotion": spec.get("emotion"), "decided_at": None, "decided_by": "",
                "reason": "", "link": {}})
            session = ep.get("session", "")
            if ep["slug"] and not session.startswith(("schedule:", "goal:")):
                proposals.append(self._repetition(txn, ep, now))
        self.store.transact(tx)
        return [p for p in proposals if p]

    def on_outcome(self, task: str, outcome: dict, key: str = "") -> None:
        """A subtask's tool records; `key` (the message id) makes a re-delivered or replayed
        outcome count once."""
        calls = [{k: c.get(k) for k in ("tool", "arguments", "target", "output", "error")}
                 for c in outcome.get("tool_calls") or []]
        key = key or f"{outcome.get('subtask_id', '')}:{outcome.get('sequence', '')}:" \
            f"{outcome.get('plan_round', '')}"

        def tx(txn):
            ep = self.store.get(txn, "episodes", task)
            if ep is None or ep.get("final") or key in ep.get("outcome_keys", []):
                return
            ep["outcome_keys"] = (ep.get("outcome_keys", []) + [key])[-MAX_CALLS_KEPT:]
            for c in calls:
                c["output"] = (c.get("output") or "")[:4000]
            ep["calls"] = (ep["calls"] + calls)[-MAX_CALLS_KEPT:]
            ep["outcomes"] = ep.get("outcomes", 0) + 1
            self.store.put(txn, "episodes", task, ep)
        self.store.transact(tx)

    def on_final(self, final: dict, at: Optional[float] = None) -> dict:
        """Close the episode: facts from checked evidence, claims for the rest (Law 0). `at` is
        when the task ended (the message's time, so a replayed one dates its facts right)."""
        task, now = final["task_id"], (time.time() if at is None else at)
        summary: dict[str, Any] = {"facts": 0, "claims": 0, "proposed": []}

        def tx(txn):
            st = self.store
            ep = st.get(txn, "episodes", task)
            if ep is None or ep.get("final"):
                return
            ws = os.path.realpath(ep.get("workspace") or str(self.s.workspace))
            src = f"task:{task}"
            goal_text = (ep.get("text") or ep.get("intent") or "")[:160]
            written: list[str] = []
            for c in ep.get("calls", []):
                obs = X.tool_observations(c.get("tool", ""), c.get("arguments") or {},
                                          c.get("target") or "", c.get("output") or "",
                                          c.get("error"))
                written += [p for p in obs.writes if p not in written]
                for path, key, value in obs.settings:
                    fid = X.entity_id("file", path)
                    st.track(txn, fid, "file", _name(fid), at=now, sentiment=None,
                             episode=task, lam=self.s.world_ema_lambda)
                    st.assert_fact(txn, fid, key.lower(), value,
                                   f"{_name(fid)} sets {key} = {value}", valid_at=now,
                                   status="tool_output", scope=ws,
                                   episode={"task": task, "at": now, "evidence":
                                            f"{c.get('tool')} output: {key}: {value}"})
                    summary["facts"] += 1
                    if key.lower() == "port":
                        pid = X.entity_id("port", value)
                        st.track(txn, pid, "port", value, at=now, sentiment=None, episode=task,
                                 lam=self.s.world_ema_lambda)
                        st.edge(txn, fid, "sets", pid, at=now, episode=task)
                for path in obs.reads:
                    rid = X.entity_id("file", path)
                    st.track(txn, rid, "file", _name(rid), at=now, sentiment=None,
                             episode=task, lam=self.s.world_ema_lambda)
                    st.edge(txn, src, "read", rid, at=now, episode=task)
                for folder in obs.folders:
                    did = X.entity_id("folder", folder)
                    if os.path.isdir(os.path.join(ws, folder)):
                        st.track(txn, did, "folder", _name(did), at=now, sentiment=None,
                                 episode=task, lam=self.s.world_ema_lambda)
                        st.edge(txn, src, "created", did, at=now, episode=task)
            for path in written:
                fid = X.entity_id("file", path)
                real = os.path.realpath(os.path.join(ws, os.path.expanduser(path)))
                if os.path.isfile(real):
                    data = open(real, "rb").read(1 << 20)
                    digest = hashlib.sha256(data).hexdigest()[:12]
                    preview = data[:120].decode("utf-8", "replace").replace("\n", " / ")
                    st.track(txn, fid, "file", _name(fid), at=now, sentiment=None, episode=task,
                             lam=self.s.world_ema_lambda)
                    st.edge(txn, src, "wrote", fid, at=now, episode=task)
                    st.assert_fact(
                        txn, fid, "content", f"sha256:{digest}",
                        f"{_name(fid)} exists in the workspace ({len(data)} bytes), written for "
                        f"'{goal_text}'; it begins: {preview}", valid_at=now, status="checked",
                        scope=ws,
                        episode={"task": task, "at": now, "evidence":
                                 f"checked in {ws}: {len(data)} bytes, sha256 {digest}"})
                    summary["facts"] += 1
                else:
                    st.assert_fact(txn, fid, "content", "reported written",
                                   f"{_name(fid)} was reported written but is not in the "
                                   f"workspace", kind="claim", status="not found", valid_at=now,
                                   scope=ws,
                                   episode={"task": task, "at": now, "evidence": "checked: absent"})
                    summary["claims"] += 1
            answer = (final.get("answer") or "").strip()
            status = final.get("status") or "unverified"
            if answer:
                verified = status == "verified" and final.get("verified", True)
                st.assert_fact(
                    txn, src, "answer", answer[:300], f"answer to '{goal_text}': {answer[:300]}",
                    kind="fact" if verified else "claim", status=status, valid_at=now, scope=ws,
                    episode={"task": task, "at": now,
                             "evidence": "; ".join(final.get("checks") or [])[:400]
                             or (final.get("summary") or "")[:200]})
                summary["facts" if verified else "claims"] += 1
                st.track(txn, src, "task", task, at=now, sentiment=None, episode=task,
                         lam=self.s.world_ema_lambda)
            ep["final"] = {"status": status, "at": now, "answer": answer[:500],
                           "summary": (final.get("summary") or "")[:300]}
            ep["calls"] = ep["calls"][-10:]
            st.put(txn, "episodes", task, ep)
            goal = st.get(txn, "goals", f"u-{task}")
            done = "COMPLETED" if status in ("verified", "unverified") else "FAILED"
            if goal is not None:
                goal.update(status=done, ended_at=now, outcome=status)
                st.put(txn, "goals", goal["id"], goal)
            for gid in sorted(st.index.goal_runs(txn, task)):  # an accepted goal's run ended
                g = st.get(txn, "goals", gid)
                if g.get("link", {}).get("run_id") == task and g["status"] == "ACTIVE":
                    g.update(status=done, ended_at=now, outcome=status)
                    st.put(txn, "goals", g["id"], g)
            if self.s.world_on and (ep.get("session") or "").startswith("schedule:"):
                summary["proposed"].append(self._failing_schedule(txn, ep, now))
        self.store.transact(tx)
        summary["proposed"] = [g for g in summary["proposed"] if g]
        return summary

    def admit_extracted(self, task: str, triples: list) -> dict:
        """What a model read from a task's answer (extract.py), under Law 0: a value is a fact
        only when code finds it verbatim in the output of one of the task's successful tool calls
        (that output is the evidence); otherwise a claim. Once per episode."""
        now = time.time()
        out = {"facts": 0, "claims": 0}

        def tx(txn):
            st = self.store
            ep = st.get(txn, "episodes", task)
            if ep is None or ep.get("extracted") or not ep.get("final"):
                return
            ws = os.path.realpath(ep.get("workspace") or str(self.s.workspace))
            goal_text = (ep.get("text") or "")[:120]
            outputs = [(c.get("tool") or "tool", (c.get("output") or "").lower())
                       for c in ep.get("calls", []) if not c.get("error")]
            for t in triples:
                value = " ".join(str(t.value).split())[:200]
                subject = " ".join(str(t.subject).split())[:120]
                if not value or not subject:
                    continue
                named = X.mentions(subject)
                sid = named[0].id if named else X.entity_id("concept", subject.lower())
                pred = " ".join(str(t.predicate).lower().split())[:40] or "is"
                where = next((tool for tool, o in outputs if value.lower() in o), None)
                kind = "fact" if where else "claim"
                st.track(txn, sid, sid.split(":", 1)[0], _name(sid), at=now, sentiment=None,
                         episode=task, lam=self.s.world_ema_lambda)
                st.assert_fact(
                    txn, sid, pred, value, f"{_name(sid)} {pred}: {value} (read by a model from "
                    f"the answer to '{goal_text}')", kind=kind, status="model_extracted",
                    valid_at=ep["final"]["at"], scope=ws,
                    episode={"task": task, "at": now, "evidence":
                             f"{where} output contains '{value}'" if where else
                             "a model's reading of the answer; in no tool output"})
                out[kind + "s"] += 1
            ep["extracted"] = True
            st.put(txn, "episodes", task, ep)
        self.store.transact(tx)
        return out

    # -- the goal generator (Def. 6) ---------------------------------------------------------------
    def _propose(self, txn, gid: str, gtype: str, description: str, trigger: str,
                 evidence: list, action: dict, now: float, *, valence: float = 0.0,
                 arousal: float = 0.3, deadline: Optional[float] = None) -> dict | None:
        if self.store.get(txn, "goals", gid) is not None:
            return None
        s = self.s
        goal = {"id": gid, "type": gtype, "description": description[:300], "status": "BLOCKED",
                "priority": round(W.priority(gtype, now, deadline=deadline, valence=valence,
                                             arousal=arousal, alpha=s.priority_alpha,
                                             beta=s.priority_beta, gamma=s.priority_gamma), 4),
                "trigger": trigger, "evidence": evidence, "action": action, "created_at": now,
                "deadline": deadline, "decided_at": None, "decided_by": "", "reason": "",
                "link": {}}
        self.store.put(txn, "goals", gid, goal)
        return goal

    def _repetition(self, txn, ep: dict, now: float) -> dict | None:
        s, st, slug = self.s, self.store, ep["slug"]
        hist = st.get(txn, "intents", slug) or []
        if ep["task"] in [h["task"] for h in hist]:
            return None
        hist = (hist + [{"at": ep["at"], "task": ep["task"], "text": ep["text"][:300],
                         "workspace": ep.get("workspace", "")}])[-MAX_INTENT_HISTORY:]
        st.put(txn, "intents", slug, hist)
        last = st.index.slug_proposed(txn, slug)          # this intent's latest proposal
        recent = [h for h in hist if h["at"] > last]
        if not s.world_on or not W.repetition([h["at"] for h in recent], now,
                                              s.world_rep_window_s, s.world_rep_threshold):
            return None
        times = [h["at"] for h in recent if now - h["at"] <= s.world_rep_window_s]
        every = W.suggested_every(times)
        text = recent[-1]["text"]
        return self._propose(
            txn, "a-" + stable_id("rep", slug, len(hist))[:10], "AUTO",
            f"Run '{text[:120]}' every {every}",
            f"repetition: the same intent ({slug}) {len(times)} times within "
            f"{s.world_rep_window_s / 3600:g} h (θ_rep {s.world_rep_threshold})",
            [{"task": h["task"], "at": h["at"], "text": h["text"][:160]} for h in recent[-5:]],
            {"kind": "schedule", "goal": text, "every": every, "slug": slug,
             "workspace": recent[-1].get("workspace", "")}, now)

    def _reactive(self, txn, task: str, text: str, emo: W.Emotion, at: float,
                  workspace: str) -> dict | None:
        failed = self.store.index.last_failed(txn)
        last = self.store.get(txn, "episodes", failed) if failed else None
        if last:
            goal = (f"Look at what failed in the earlier task '{last['text'][:120]}' "
                    f"({last['final']['status']}: {last['final']['summary'][:120]}) and report "
                    f"the cause; change nothing")
        else:
            goal = f"Look at what failed, as the user reports: '{text[:160]}'; report the cause; change nothing"
        evidence = [{"task": task, "at": at, "text": text[:200], "valence": emo.valence,
                     "arousal": emo.arousal, "label": emo.label, "cues": list(emo.cues)}]
        if last:
            evidence.append({"task": last["task"], "at": last["final"]["at"],
                             "text": last["text"][:160], "outcome": last["final"]["status"]})
        s = self.s
        return self._propose(
            txn, "r-" + stable_id("neg", task)[:10], "REACTIVE", goal,
            f"negative emotional state: v {emo.valence:+.2f} < −{s.world_neg_valence:g} and "
            f"a {emo.arousal:.2f} > {s.world_arousal:g} ({emo.label})", evidence,
            {"kind": "run", "goal": goal, "workspace": workspace}, at,
            valence=emo.valence, arousal=emo.arousal)

    # -- SYSTEM goals: the runtime's own upkeep, observed by code ---------------------------------
    def _failing_schedule(self, txn, ep: dict, now: float) -> dict | None:
        """The last θ_fail runs of a schedule all failed (abandoned / not possible) → propose to
        pause it. One proposal per streak of failures: a success starts a new streak."""
        s, session = self.s, ep["session"]
        sid = session.split(":", 1)[1]
        runs = sorted((e for e in (self.store.get(txn, "episodes", t)
                                   for t in self.store.index.session_runs(txn, session))
                       if e and e.get("session") == session and e.get("final")),
                      key=lambda e: e["final"]["at"])
        streak: list[dict] = []
        for e in reversed(runs):
            if e["final"]["status"] not in FAILED:
                break
            streak.insert(0, e)
        if s.world_fail_threshold <= 0 or len(streak) < s.world_fail_threshold:
            return None
        text = streak[-1]["text"][:120]
        return self._propose(
            txn, "s-" + stable_id("schedule-failing", sid, streak[0]["task"])[:10], "SYSTEM",
            f"Pause schedule {sid}: its last {len(streak)} runs of '{text}' failed",
            f"repeated failure: {len(streak)} runs of schedule {sid} in a row ended "
            f"{'/'.join(sorted({e['final']['status'] for e in streak}))} "
            f"(θ_fail {s.world_fail_threshold})",
            [{"task": e["task"], "at": e["final"]["at"], "outcome": e["final"]["status"],
              "summary": e["final"].get("summary", "")[:160]} for e in streak[-5:]],
            {"kind": "pause_schedule", "schedule_id": sid}, now)

    def check_storage(self, now: Optional[float] = None) -> list[dict]:
        """ARTOO_HOME (audit log, task logs, stores, logs) past `world_storage_max_bytes` → a
        SYSTEM proposal naming the largest parts. Again only once it has grown by half since the
        last such proposal, and never while one still waits for the operator."""
        now = time.time() if now is None else now
        bound = self.s.world_storage_max_bytes
        if not self.s.world_on or bound <= 0:
            return []
        parts = {p.name: tree_size(p) for p in sorted(Path(self.s.home).iterdir())
                 if not p.is_symlink()} if Path(self.s.home).is_dir() else {}
        total = sum(parts.values())
        if total <= bound:
            return []
        out: list[dict] = []

        def tx(txn):
            prior = [g for _, g in self.store.scan(txn, "goals")
                     if g.get("action", {}).get("kind") == "storage"]
            if any(g["status"] == "BLOCKED" for g in prior):
                return
            last = max((g["action"].get("total", 0) for g in prior), default=0)
            if last and total < 1.5 * last:
                return
            top = sorted(parts.items(), key=lambda kv: -kv[1])[:5]
            out.append(self._propose(
                txn, "s-" + stable_id("storage", total, now)[:10], "SYSTEM",
                f"Reduce artoo's data in {self.s.home}: {_size(total)}, above the bound "
                f"{_size(bound)} (largest: " + ", ".join(f"{k} {_size(v)}" for k, v in top[:3])
                + ")",
                f"storage: {_size(total)} > world_storage_max_bytes {_size(bound)}",
                [{"part": k, "bytes": v} for k, v in top],
                {"kind": "storage", "total": total, "bound": bound, "home": str(self.s.home),
                 "parts": dict(top)}, now))
        self.store.transact(tx)
        return [g for g in out if g]

    def check_deadlines(self, now: Optional[float] = None) -> list[dict]:
        """Time pressure: a stated deadline nearer than θ_urgency proposes a reminder."""
        now = time.time() if now is None else now
        out: list[dict] = []
        if not self.s.world_on:
            return out

        def tx(txn):
            for key, d in list(self.store.scan(txn, "deadlines")):
                if d["fired"] or not W.time_pressure(now, d["deadline"], self.s.world_urgency_s):
                    continue
                d["fired"] = True
                self.store.put(txn, "deadlines", key, d)
                ep = self.store.get(txn, "episodes", d["task"]) or {}
                status = (ep.get("final") or {}).get("status", "still running or not started")
                goal = (f"Report the state of '{d['text'][:140]}' (due {_when(d['deadline'])}); "
                        f"change nothing")
                out.append(self._propose(
                    txn, "t-" + stable_id("deadline", key)[:10], "REACTIVE", goal,
                    f"time pressure: due {_when(d['deadline'])}, less than "
                    f"{self.s.world_urgency_s / 60:g} min away (θ_urgency)",
                    [{"task": d["task"], "text": d["text"][:200], "deadline": d["deadline"],
                      "task_outcome": status}],
                    {"kind": "run", "goal": goal, "workspace": ep.get("workspace", "")}, now,
                    deadline=d["deadline"]))
        self.store.transact(tx)
        return [g for g in out if g]

    # -- operator decisions (Law 1) ------------------------------------------------------------
    def decide(self, ref: str, decision: str, by: str, reason: str) -> dict:
        def tx(txn):
            goal = self.store.find_goal(txn, ref)
            if goal["status"] != "BLOCKED":
                raise WorldError(f"goal {goal['id']} is {goal['status']}, not a proposal "
                                 f"waiting for a decision")
            goal.update(status="PENDING" if decision == "accept" else "REJECTED",
                        decided_at=time.time(), decided_by=by, reason=reason)
            self.store.put(txn, "goals", goal["id"], goal)
            self.store.audit(txn, decision, goal=goal["id"], by=by, reason=reason)
            return goal
        return self.store.transact(tx)

    def link(self, ref: str, info: dict) -> dict:
        def tx(txn):
            goal = self.store.find_goal(txn, ref)
            if goal["status"] not in ("PENDING", "ACTIVE"):
                raise WorldError(f"goal {goal['id']} is {goal['status']}: nothing to link")
            what = dict(info)
            done = bool(what.pop("done", False))     # an action done at once (pause, report)
            goal["link"] = {**goal.get("link", {}), **what}
            goal["status"] = "COMPLETED" if done else "ACTIVE"
            if done:
                goal["ended_at"] = time.time()
            self.store.put(txn, "goals", goal["id"], goal)
            self.store.audit(txn, "link", goal=goal["id"], link=what)
            return goal
        return self.store.transact(tx)

    def forget(self, ref: str, by: str, reason: str) -> dict:
        """Mark an entity (and the facts about it) forgotten: out of every projection and listing,
        kept in the store, the decision audited."""
        def tx(txn):
            st = self.store
            ent = st.find_entity(txn, ref)
            now = time.time()
            mark = {"at": now, "by": by, "reason": reason}
            ent["forgotten"] = mark
            st.put(txn, "entities", ent["id"], ent)
            about = [(fid, f) for fid, f in st.scan(txn, "facts")      # written after the scan
                     if ent["id"] in (f["subject"], f"{f['predicate']}:{f['object']}")
                     and not f.get("forgotten")]
            for fid, f in about:
                f["forgotten"] = mark
                st.put(txn, "facts", fid, f)
            n = len(about)
            st.audit(txn, "forget", entity=ent["id"], by=by, reason=reason, facts=n)
            return {**ent, "facts_forgotten": n}
        return self.store.transact(tx)

    # -- queries -----------------------------------------------------------------------------------
    # The listings below read every record once but keep only the n they show (heapq.nlargest:
    # the order a stable sort gives, ties in scan order): a listing of a long history must not
    # lift the long-lived world process's heap by the size of that history.
    def _top(self, db: str, n: int, keep, key) -> list[dict]:
        with self.store.read() as txn:
            return heapq.nlargest(n, (v for _, v in self.store.scan(txn, db) if keep(v)), key=key)

    def entities(self, n: int = 50, now: Optional[float] = None,
                 include_forgotten: bool = False) -> list[dict]:
        now = time.time() if now is None else now
        top = self._top("entities", max(1, n), lambda e: include_forgotten or not e.get("forgotten"),
                        lambda e: self.weight(e, now))
        return [self.entity_view(e, now) for e in top]

    def facts(self, *, at: Optional[float] = None, as_of: Optional[float] = None,
              claims: bool = False, n: int = 50) -> tuple[list[dict], list[dict]]:
        """Facts valid at `at` (default now), as known at `as_of` (default now); claims apart."""
        now = time.time()
        at = now if at is None else at

        def known(f: dict) -> bool:
            return not f.get("forgotten") and (as_of is None or known_at(f, as_of))
        facts = self._top("facts", n, lambda f: known(f) and f["kind"] == "fact" and
                          valid_at(f, at), lambda f: f["valid_at"])
        cl = self._top("facts", n, lambda f: known(f) and f["kind"] == "claim",
                       lambda f: f["created_at"]) if claims else []
        return facts, cl

    def show(self, ref: str) -> dict:
        now = time.time()
        with self.store.read() as txn:
            ent = self.store.find_entity(txn, ref)
            facts = [f for _, f in self.store.scan(txn, "facts")
                     if ent["id"] in (f["subject"], f"{f['predicate']}:{f['object']}")]
            edges = [e for _, e in self.store.scan(txn, "edges")
                     if ent["id"] in (e["src"], e["dst"])]
        facts.sort(key=lambda f: f["valid_at"])
        return {"entity": self.entity_view(ent, now), "facts": facts, "edges": edges}

    def _related_facts(self, idx, txn, kws: set, ids: dict, ws: str, now: float) -> list[str]:
        """The ids of the projection's facts, best first: ranked among those sharing a word with
        the goal or about a related entity, and the workspace's latest — any other fact of the
        workspace ranks by its recency alone, so below the latest `world_projection_facts` of
        them (ties kept). Ties go by id, the order a scan of the store gave."""
        k = self.s.world_projection_facts
        shared, metas = idx.facts_for(txn, kws, ids)
        found = {}
        for fid, n in shared.items():
            if (rank := fact_rank(metas[fid], n, ids, ws, now)) is not None:
                found[fid] = rank
        latest: list[float] = []
        for fid in idx.newest_in(txn, ws):
            meta = idx.meta(txn, fid)
            if (rank := fact_rank(meta, shared.get(fid, 0), ids, ws, now)) is None:
                continue
            recency = W.recency(now, meta.valid_at, FACT_RECENCY_S)
            if len(latest) >= k and recency < latest[-1]:
                break
            latest.append(recency)
            found[fid] = rank
        return [fid.decode()
                for fid, _ in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    def project(self, text: str, now: Optional[float] = None, workspace: str = "",
                task: str = "") -> dict:
        """The bounded projection π for a goal (seed 002 §1.5): the few most important related
        entities and the facts valid now, as prompt text. Files, folders and what tasks found
        belong to a workspace: only those of the goal's workspace are shown. An entity only the
        goal's own task (`task`) has mentioned is not something artoo knew before it."""
        now = time.time() if now is None else now
        s = self.s
        real: dict[str, str] = {}                 # one realpath per distinct workspace

        def resolve(path: str) -> str:
            if path not in real:
                real[path] = os.path.realpath(path)
            return real[path]
        ws = resolve(workspace or str(s.workspace))
        idx = self.store.index

        def where(txn, t: str) -> str | None:
            known = idx.workspace(txn, t)
            return None if known is None else resolve(known or str(s.workspace))
        kws = X.keywords(text)
        named = {m.id for m in X.mentions(text)}
        ents = []
        with self.store.read() as txn:
            # only an entity that shares a word with the goal or that it names can be related
            # (rel > 0); in id order, the order a scan of the store gave the stable sort below
            for eid in sorted(idx.entities_for(txn, kws, named)):
                e = self.store.get(txn, "entities", eid)
                if e is None or e.get("forgotten"):
                    continue
                if e["kind"] in ("file", "folder", "task") and e["episodes"] and \
                        not any(where(txn, t) == ws for t in e["episodes"]):
                    continue                                  # another workspace's
                if task and e["episodes"] and set(e["episodes"]) <= {task}:
                    continue                              # the goal's own mention, nothing known
                overlap = len(kws & name_words(e["name"]))
                related = (1.0 if e["id"] in named else 0.0) + 0.5 * overlap
                ents.append((related + self.weight(e, now), related, e))
            ents.sort(key=lambda x: -x[0])
            chosen = [(rel, e) for score, rel, e in ents if rel > 0][:s.world_projection_entities]
            ids = {e["id"]: min(1.0, rel) for rel, e in chosen}     # how related each one is
            chosen = [e for _, e in chosen]
            facts = [self.store.get(txn, "facts", fid)
                     for fid in self._related_facts(idx, txn, kws, ids, ws, now)]
        if not facts and not chosen:
            return {"text": "", "entities": [], "facts": []}
        lines = [W.PROJECTION_HEADER]
        for f in facts:
            mark = "" if f["kind"] == "fact" else "(no check confirmed this answer) "
            lines.append(f"- [{_when(f['valid_at'])}] {mark}{f['text']}")
        if chosen:
            lines.append("Related: " + ", ".join(
                f"{e['kind']} {e['name']} ({e['mentions']}× mentioned, last {_when(e['last_mentioned'])})"
                for e in chosen))
        text_out = "\n".join(lines)
        if len(text_out) > s.world_projection_chars:
            text_out = text_out[:s.world_projection_chars - 1] + "…"
        return {"text": text_out, "entities": [self.entity_view(e, now) for e in chosen],
                "facts": facts}

    def goals(self, status: str = "", n: int = 50, include_user: bool = False) -> list[dict]:
        """Proposals waiting for the operator first, then the newest."""
        return self._top("goals", n, lambda g: (include_user or g["type"] != "USER") and (
            not status or g["status"].lower() == status.lower()),
            lambda g: (g["status"] == "BLOCKED", g["created_at"]))

    def goal(self, ref: str) -> dict:
        with self.store.read() as txn:
            return self.store.find_goal(txn, ref)

    def stats(self) -> dict[str, Any]:
        st = self.store.stats()
        st["world"] = "on" if self.s.world_on else "off"
        return st
