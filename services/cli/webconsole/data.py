"""What the web console shows, as JSON-ready dicts: read from what already exists, never written.

Tasks come from the decision logs through `services/cli/tasks.py` (`summarize`, `details`), the
message flow of one task and the audit pages from the audit log through `services/cli/audit.py`
(`decoded`, `EnvelopeFilter`, `build_timeline`) and `auditor.log` (`iter_records`, `verify`), the
daemon from `services.runtime.daemon.collect_status`. Nothing here sends on the bus; memory
queries (request/reply, never a work message) are made by the server with its own client.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from protocol.settings import Settings

from auditor import log as audit_log

from .. import audit as audit_cli
from .. import tasks as tasks_cli

# Which process writes each decision-log event (events with a `role` field name it themselves).
KIND_ROLE = {
    "task_begin": "perceiver", "clarification": "perceiver", "clarification_reply": "perceiver",
    "memory_query": "planner", "plan": "planner", "plan_source": "planner",
    "plan_rejected": "planner", "planning_failed": "planner", "dispatch": "planner",
    "subtask_assigned": "planner", "subtask_reoffered": "planner", "planner_resumed": "planner",
    "subtask_begin": "effector", "tool_call": "executor", "approval": "executor",
    "criterion_verdict": "agentval", "correction": "agentval", "merge_verdict": "metaval",
    "replan": "metaval", "metaval_resumed": "metaval", "ggs_armed": "ggs",
    "ggs_decision": "ggs", "plan_directive": "ggs", "memory_write": "ggs", "task_end": "ggs",
    "schedule_fired": "scheduler", "world": "perceiver",
}
_DETAIL_SKIP = {"kind", "ts", "task_id", "messages", "response", "role"}
MAX_EVENT_TEXT = 240


def _short(value: Any, limit: int = MAX_EVENT_TEXT) -> str:
    return tasks_cli._short(value, limit)


# -- tasks ------------------------------------------------------------------------------------

def task_rows(settings: Settings, *, state: str = "all", status: str = "", q: str = "",
              limit: int = 100, now: float | None = None) -> list[dict]:
    """`artoo tasks ls --json` rows, newest first, with the same filters plus a text search."""
    now = time.time() if now is None else now
    rows: list[dict] = []
    for path in tasks_cli.log_files(settings):
        row = tasks_cli.summarize(tasks_cli.read_events(path), now)
        if not row["id"]:
            continue
        if state not in ("", "all") and state not in (row["state"], row["lifecycle"]):
            continue
        if status and row["status"] != status:
            continue
        if q and q.lower() not in f"{row['id']} {row['goal']} {row['workspace']}".lower():
            continue
        rows.append(row)
        if limit and len(rows) >= limit:
            break
    return rows


def find_log(settings: Settings, run_id: str) -> Path | None:
    """The decision log of exactly this run id (no prefix guessing in a URL)."""
    for path in tasks_cli.log_files(settings):
        if path.stem == run_id:
            return path
    return None


def ggs_points(events: Iterable[dict]) -> list[dict]:
    """One point per GGS round (each `ggs_decision`, numbered from 0 like the plan rounds it
    judges): D, P, Ω, L, ∇L and the directive."""
    out = []
    for i, e in enumerate(x for x in events if x.get("kind") == "ggs_decision"):
        out.append({"round": i, "replan_round": e.get("replan_round"), "ts": e.get("ts"),
                    "d": e.get("d"), "p": e.get("p"), "omega": e.get("omega"), "l": e.get("l"),
                    "grad_l": e.get("grad_l"), "directive": e.get("directive", ""),
                    "urgency": e.get("urgency", ""), "reason": e.get("reason", ""),
                    "rationale": e.get("rationale", "")})
    return out


def event_detail(e: dict) -> str:
    """A decision-log event in one line, without its kind and time (the table has those)."""
    kind = e.get("kind")
    if kind == "llm_call":
        return (f"{e.get('prompt_tokens') or 0}+{e.get('completion_tokens') or 0} tokens, "
                f"{float(e.get('latency_ms') or 0) / 1000:.1f}s"
                + ("" if e.get("ok", True) else f", error: {e.get('error')}"))
    if kind == "tool_call":
        out = e.get("tool_output") if e.get("tool_output") is not None else e.get("tool_error", "")
        return _short(f"{e.get('tool')} {_short(e.get('tool_input'), 120)} → {out or ''}")
    if kind == "ggs_decision":
        return (f"{e.get('directive')}  D={e.get('d')} P={e.get('p')} Ω={e.get('omega')} "
                f"L={e.get('l')}")
    return _short(" ".join(f"{k}={_short(v, 80)}" for k, v in e.items() if k not in _DETAIL_SKIP))


def timeline(events: list[dict]) -> list[dict]:
    """Every decision-log event as (t since the first, ts, role, kind, subtask, detail)."""
    start = min((e.get("ts", 0.0) for e in events), default=0.0)
    out = []
    for e in sorted(events, key=lambda x: x.get("ts", 0.0)):
        kind = str(e.get("kind", "?"))
        role = e.get("role") or KIND_ROLE.get(kind)
        if kind == "subtask_end":      # the agent-validator's verdict, or the dispatcher's
            role = "planner" if e.get("source") == "dispatcher" else "agentval"
        out.append({"t": round(e.get("ts", start) - start, 3), "ts": e.get("ts"),
                    "role": str(role or "?"), "kind": kind,
                    "subtask": e.get("subtask_id") or "", "detail": event_detail(e)})
    return out


def attempts(events: list[dict]) -> list[dict]:
    """Each subtask attempt with its tool calls and the agent-validator's verdicts."""
    by_key: dict[tuple, dict] = {}
    for e in events:
        kind = e.get("kind")
        if kind not in ("tool_call", "criterion_verdict") or not e.get("subtask_id"):
            continue
        key = (e["subtask_id"], e.get("attempt", 1))
        slot = by_key.setdefault(key, {"subtask_id": key[0], "attempt": key[1],
                                       "tool_calls": [], "verdicts": []})
        if kind == "tool_call":
            slot["tool_calls"].append({
                "tool": e.get("tool"), "input": _short(e.get("tool_input"), 400),
                "output": _short(e.get("tool_output") or "", 600),
                "error": e.get("tool_error") or "", "law1": e.get("law1") or "",
                "duplicate": bool(e.get("duplicate")), "elapsed_ms": e.get("elapsed_ms")})
        else:
            slot["verdicts"].append({"criterion": e.get("criterion"), "met": e.get("met"),
                                     "evidence": _short(e.get("evidence") or "", 400)})
    return list(by_key.values())


def task_detail(settings: Settings, run_id: str, *, with_messages: bool = True) -> dict | None:
    """`artoo tasks show --json` plus attempts, approvals, the final result, the timeline, the GGS
    points and (from the audit log, when there is one) the task's messages across processes."""
    path = find_log(settings, run_id)
    if path is None:
        return None
    events = tasks_cli.read_events(path)
    out = tasks_cli.details(events)
    out["attempts"] = attempts(events)
    out["approvals"] = [{k: e.get(k) for k in ("ts", "subtask_id", "action", "command", "paths",
                                                "classification", "reason", "approved",
                                                "decided_by")}
                        for e in events if e.get("kind") == "approval"]
    end = next((e for e in reversed(events) if e.get("kind") == "task_end"), None)
    out["final"] = ({k: v for k, v in end.items() if k not in ("kind", "task_id")}
                    if end else None)
    out["timeline"] = timeline(events)
    out["ggs_points"] = ggs_points(events)
    out["messages"] = task_messages(settings, run_id, out["started_at"]) if with_messages else []
    return out


def task_messages(settings: Settings, run_id: str, started_at: float | None) -> list[dict]:
    """The task's bus messages from the audit log (`artoo tap timeline`), flattened."""
    directory = audit_cli.log_directory(settings)
    if not audit_log.list_segments(directory):
        return []
    since = (started_at - 60.0) if started_at else None
    tl = audit_cli.build_timeline(run_id, audit_log.iter_records(directory, since))
    flat = []
    for entry in tl["timeline"]:
        for e in entry.get("events", [entry]):
            flat.append({"t": e["t"], "ts": e["ts"], "type": e["type"], "from": e["from"],
                         "node": e["node"], "to": e["to"] or "", "summary": e["summary"],
                         "subtask": entry.get("subtask", ""), "sends": e["sends"],
                         "acks": len(e["acks"])})
    return flat


# -- daemon -----------------------------------------------------------------------------------

def daemon_status(settings: Settings, window_s: float = 1.0) -> dict:
    from protocol.bus import BusTimeout
    from services.runtime import daemon
    try:
        report = daemon.collect_status(settings, window_s=window_s)
        report["bus"] = "up"
    except BusTimeout:
        report = daemon.unreachable_report(settings)
    report["proxy"] = proxy_counters(settings)
    report["checked_at"] = time.time()
    return report


def proxy_counters(settings: Settings) -> dict:
    """The proxy's own counters (`artoo tap stats`): messages and bytes each way, the capture
    feed to the tap; {} when the proxy does not answer."""
    from services.runtime.bus import query_control
    try:
        reply = query_control(settings, "stats", timeout_s=1.0)
    except (OSError, TimeoutError, RuntimeError, ValueError):
        return {}
    stats = reply.get("stats") or {}
    capture = stats.get("capture") or {}
    keep = ("frontend_msgs_in", "frontend_bytes_in", "backend_msgs_out", "uptime_s")
    out = {k: stats[k] for k in keep if k in stats}
    out.update({f"capture_{k}": capture[k] for k in ("captured", "acked", "dropped", "buffered")
                if k in capture})
    return out


# -- audit log --------------------------------------------------------------------------------

def audit_records(settings: Settings, *, types: Iterable[str] = (), task: str = "",
                  roles: Iterable[str] = (), grep: str = "", since: str = "", until: str = "",
                  limit: int = 200, include_heartbeats: bool = False) -> dict:
    """`artoo tap log --json` with its filters: the newest `limit` matching messages."""
    directory = audit_cli.log_directory(settings)
    if not audit_log.list_segments(directory):
        return {"available": False, "records": [], "directory": str(directory)}
    flt = audit_cli.EnvelopeFilter.build([t for t in types if t], task,
                                         [r for r in roles if r], grep)
    since_ts = audit_cli.parse_when(since) if since else None
    until_ts = audit_cli.parse_when(until) if until else None
    hits: list[dict] = []
    for rec, env, _problem in audit_cli.decoded(audit_log.iter_records(directory, since_ts,
                                                                        until_ts)):
        if env is None or not flt.match(env):
            continue
        if not include_heartbeats and not flt.types and env.type in ("Heartbeat", "Hello",
                                                                       "Ack"):
            continue
        hits.append({"seq": rec.seq, "recv_ts": rec.recv_ts, "ts": env.ts, "type": env.type,
                     "from": env.sender, "node": env.node, "to": env.to or "",
                     "task": env.task or audit_cli.body_task(env),
                     "summary": audit_cli.summary(env, 120)})
        if len(hits) > limit * 4:            # keep memory bounded; the newest are kept below
            hits = hits[-limit:]
    return {"available": True, "records": hits[-limit:][::-1], "directory": str(directory)}


def audit_verify(settings: Settings) -> dict:
    directory = audit_cli.log_directory(settings)
    if not directory.is_dir():
        return {"available": False, "ok": None, "directory": str(directory)}
    res = audit_log.verify(directory).as_dict()
    res["available"] = True
    res["directory"] = str(directory)
    return res
