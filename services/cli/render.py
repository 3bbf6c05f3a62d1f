"""How `artoo run` / `artoo repl` show a task: one flow line per bus message, a spinner label for what
the pipeline is waiting on, the result, the decision trail from the task log, and the cost table.

Pure functions over (envelope, message) and task-log events, so they are unit-testable and shared by
both commands.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Iterable

from rich.markup import escape
from rich.table import Table

ICONS = {"user": "🧑", "perceiver": "🧠", "planner": "📐", "executor": "⚙️ ", "agentval": "🔍",
         "metaval": "🔮", "memory": "💾", "ggs": "📈", "spawner": "🚀", "auditor": "📡"}
ROLE_ORDER = ("perceiver", "planner", "executor", "agentval", "verifier", "metaval", "memory")
SILENT = {"Heartbeat", "Ack", "Hello", "LlmUsage", "SubTaskOffer", "SubTaskClaim", "MemoryQuery",
          "MemoryResult", "DreamerEvent"}
WAITING = {
    "UserRequest": "perceiving the request",
    "ClarificationReply": "perceiving the request",
    "TaskSpec": "calibrating memory and planning",
    "MemoryRecall": "planning",
    "DispatchManifest": "placing subtasks on effectors",
    "SubTask": "placing subtasks on effectors",
    "SubTaskAssign": "starting effectors",
    "EffectorStarted": "executing",
    "ExecutionResult": "validating",
    "CorrectionSignal": "executing a correction",
    "ApprovalDecision": "executing",
    "SubTaskOutcome": "waiting for the other subtasks / merging",
    "EffectorExited": "waiting for outcomes",
    "ReplanRequest": "GGS deciding",
    "OutcomeSummary": "GGS finishing",
    "PlanningFailed": "GGS finishing",
    "TaskLost": "GGS finishing",
    "PlanDirective": "replanning",
    "TaskCancel": "cancelling",
}


def clip(text: Any, n: int = 70) -> str:
    text = " ".join(str(text if text is not None else "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def esc(text: Any, n: int = 70) -> str:
    """Clipped and escaped for rich markup (paths and tags like [a / b] are not markup)."""
    return escape(clip(text, n))


def _arrow(frm: str, to: str | None) -> str:
    left = f"{ICONS.get(frm, '·')} {frm}"
    return f"{left} → {ICONS.get(to, '·')} {to}" if to else left


def describe(env, msg) -> str | None:
    """One rich-markup line for a message of the watched task, or None to stay quiet."""
    t = env.type
    if t in SILENT or msg is None:
        return None
    d = ""
    to = env.to
    if t == "UserRequest":
        d = esc(msg.text)
    elif t == "ClarificationRequest":
        d = f"question (round {msg.round}): {esc(msg.question)}"
    elif t == "ClarificationReply":
        d = f"answer: {esc(msg.answer) or '(none)'}"
    elif t == "ConversationalReply":
        d = esc(msg.answer)
    elif t == "TaskSpec":
        d = f"{esc(msg.intent, 60)}  [dim]({esc(msg.intent_slug)})[/dim]"
        to = "planner"
    elif t == "MemoryRecall":
        first = next((ln for ln in msg.constraints.splitlines() if ln.strip()), "")
        d = (f"recall \\[{esc(msg.space)} / {esc(msg.entity)}] sops={msg.sops} att={msg.attention:.2f} "
             f"dec={msg.decision:+.2f} → {msg.action}" + (f" | {esc(first, 50)}" if first else ""))
    elif t == "DispatchManifest":
        d = (f"plan round {msg.plan_round}: {len(msg.subtask_ids)} subtask(s), "
             f"{len(msg.task_criteria)} task criteria")
    elif t == "SubTask":
        crit = msg.success_criteria
        more = f" (+{len(crit) - 1})" if len(crit) > 1 else ""
        d = (f"#{msg.sequence} {esc(msg.intent, 50)}"
             + (f" | {esc(crit[0].text, 40)}{more}" if crit else ""))
        to = None
    elif t == "SubTaskAssign":
        d = f"{esc(msg.subtask_id)} → {esc(msg.spawner)}"
    elif t == "EffectorStarted":
        d = f"effector pid {msg.pid} for {esc(msg.subtask_id)} ({msg.spawn_ms:.0f} ms)"
    elif t == "EffectorExited":
        d = f"effector {esc(msg.subtask_id)} exited: {esc(msg.reason or msg.exit_code)}"
    elif t == "ExecutionResult":
        d = f"{esc(msg.subtask_id)} attempt {msg.attempt}: {msg.status} ({len(msg.tool_calls)} tool call(s))"
    elif t == "CorrectionSignal":
        d = f"{esc(msg.subtask_id)} attempt {msg.attempt_number} — {esc(msg.what_was_wrong, 60)}"
    elif t == "ApprovalRequest":
        d = f"[yellow]approval needed[/yellow] {msg.kind}: {esc(msg.command or ', '.join(msg.paths), 60)}"
    elif t == "ApprovalDecision":
        d = ("[green]approved[/green]" if msg.approved else "[red]denied[/red]") + f" by {esc(msg.decided_by)}"
    elif t == "SubTaskOutcome":
        colour = "green" if msg.status == "matched" else "red"
        d = f"{esc(msg.subtask_id)} [{colour}]{msg.status}[/{colour}]"
        if msg.gap_trajectory:
            d += f" | score={msg.gap_trajectory[-1].score:.2f}"
        if msg.status == "failed" and msg.failure_reason:
            d += f" | {esc(msg.failure_reason, 60)}"
        to = "metaval" if env.sender != "planner" else to
    elif t == "ReplanRequest":
        n = len(msg.outcomes)
        d = (f"replan: {len(msg.failed_subtasks)}/{n} failed | {esc(msg.gap_summary, 60)}"
             + (" [red](recommend abandon)[/red]" if msg.recommendation == "abandon" else ""))
    elif t == "OutcomeSummary":
        d = f"[green]accept[/green]: {esc(msg.summary, 60)}"
    elif t == "PlanDirective":
        g = msg.grad_l
        arrow = "[green]↑[/green]" if g < -0.1 else "[red]↓[/red]" if g > 0.1 else "→"
        d = (f"{arrow} {esc(msg.prev_directive)}→{esc(msg.directive)} D={msg.loss.D:.2f} P={msg.loss.P:.2f} "
             f"∇L={g:+.2f} Ω={msg.loss.Omega:.0%}")
        if msg.blocked_tools or msg.blocked_targets:
            d += f" | blocked: {esc(', '.join(msg.blocked_tools + msg.blocked_targets), 40)}"
    elif t == "PlanningFailed":
        d = f"[red]planning failed[/red]: {esc(msg.error, 70)}"
    elif t == "TaskLost":
        d = f"[red]{esc(msg.role)} state lost[/red]: {esc(msg.reason, 70)}"
    elif t == "FinalResult":
        colour = "red" if msg.directive == "abandon" else "green"
        d = f"[{colour}]{msg.directive}[/{colour}]"
        if msg.loss and (msg.loss.D > 0 or msg.loss.Omega > 0 or msg.grad_l):
            d += (f" D={msg.loss.D:.2f} ∇L={msg.grad_l:+.2f} Ω={msg.loss.Omega:.0%} | "
                  f"{msg.replans} replan(s)")
    elif t == "TaskCancel":
        d = f"[yellow]cancel[/yellow]: {esc(msg.reason)}"
    else:
        d = ""
    return f"{_arrow(env.sender, to)}  {d}" if d else _arrow(env.sender, to) + f"  {t}"


def waiting_label(type_name: str) -> str | None:
    return WAITING.get(type_name)


# ---------------------------------------------------------------------------------------------
# after the run
# ---------------------------------------------------------------------------------------------

def format_output(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def decision_trail(events: Iterable[dict]) -> list[str]:
    """The memory, plan, meta-validator and GGS lines of a run's decision log (plain text)."""
    lines = []
    for e in events:
        k = e.get("kind")
        if k == "world":
            emo = e.get("emotion") or {}
            lines.append(f"world    {emo.get('label', 'neutral')} v={float(emo.get('valence') or 0):+.2f} "
                         f"a={float(emo.get('arousal') or 0):.2f} priority="
                         f"{float(e.get('priority') or 0):.2f} "
                         + (f"facts={e.get('world_facts', 0)} entities={e.get('world_entities', 0)}"
                            if not e.get("world_error") else clip(e["world_error"], 60)))
        elif k == "memory_query":
            if e.get("error"):
                lines.append(f"memory   unavailable: {clip(e['error'], 70)}")
            else:
                lines.append(f"memory   [{e.get('space')} / {e.get('entity')}] "
                             f"sops={e.get('sop_count', 0)} action={e.get('action', 'Ignore')} "
                             f"att={float(e.get('attention') or 0):.2f} "
                             f"dec={float(e.get('decision') or 0):+.2f}")
        elif k == "plan":
            subs = e.get("subtasks") or []
            seqs = sorted({s.get("sequence", 1) for s in subs})
            lines.append(f"plan     round {e.get('plan_round', 0)}: {len(subs)} subtask(s) in "
                         f"{len(seqs)} group(s), {len(e.get('task_criteria') or [])} task criteria")
        elif k == "plan_rejected":
            lines.append(f"plan     rejected (attempt {e.get('attempt')}): "
                         f"{clip('; '.join(e.get('violations') or []), 70)}")
        elif k == "planning_failed":
            lines.append(f"plan     failed: {clip(e.get('error'), 80)}")
        elif k == "merge_verdict":
            lines.append(f"metaval  round {e.get('plan_round')}: {e.get('verdict')} — "
                         f"{clip(e.get('summary'), 60)}")
        elif k == "replan":
            lines.append(f"metaval  replan #{e.get('replan_round')} ({e.get('recommendation')}): "
                         f"{clip(e.get('gap_summary'), 60)}")
        elif k == "ggs_decision":
            def f(key):
                v = e.get(key, e.get(key.upper()))
                return f"{float(v):.2f}" if isinstance(v, (int, float)) else "-"
            lines.append(f"ggs      D={f('d')} P={f('p')} Ω={f('omega')} L={f('l')} "
                         f"∇L={f('grad_l')} → {e.get('directive')}"
                         + (f" ({clip(e.get('rationale'), 50)})" if e.get("rationale") else ""))
        elif k == "plan_directive":
            blocked = list(e.get("blocked_tools") or []) + list(e.get("blocked_targets") or [])
            lines.append(f"ggs      directive {e.get('directive')}"
                         + (f" blocked: {clip(', '.join(map(str, blocked)), 50)}" if blocked else ""))
        elif k == "memory_write":
            lines.append(f"memory   write {e.get('level', '')} state={e.get('state')} "
                         f"[{e.get('space')} / {e.get('entity')}]")
    return lines


def cost_rows(usages: Iterable[dict]) -> list[tuple[str, int, int, int, float]]:
    """(role, calls, prompt tokens, completion tokens, seconds) per role, in pipeline order."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    for u in usages:
        a = acc[u.get("role", "?")]
        a[0] += 1
        a[1] += int(u.get("prompt_tokens") or 0)
        a[2] += int(u.get("completion_tokens") or 0)
        a[3] += float(u.get("latency_ms") or 0) / 1000
    order = [r for r in ROLE_ORDER if r in acc] + sorted(r for r in acc if r not in ROLE_ORDER)
    return [(r, int(acc[r][0]), int(acc[r][1]), int(acc[r][2]), acc[r][3]) for r in order]


def cost_summary(usages: Iterable[dict]) -> dict:
    """The cost of a run for `--json`: calls, tokens and seconds per role and in total."""
    rows = cost_rows(usages)
    per_role = {r: {"calls": c, "prompt_tokens": pt, "completion_tokens": ct,
                    "seconds": round(secs, 3)} for r, c, pt, ct, secs in rows}
    total = {"calls": sum(r[1] for r in rows), "prompt_tokens": sum(r[2] for r in rows),
             "completion_tokens": sum(r[3] for r in rows),
             "seconds": round(sum(r[4] for r in rows), 3)}
    return {"total": total, "per_role": per_role}


STATUS_LINE = {"verified": "[green]✅ done, verified[/]", "unverified": "[yellow]☑️  done, NOT verified[/]",
               "not_possible": "[blue]🚫 not possible[/]", "abandoned": "[red]❌ abandoned[/]"}


def cost_table(usages: Iterable[dict]) -> Table:
    table = Table(title="Cost", title_justify="left", show_edge=False)
    for col in ("role", "calls", "prompt tok", "completion tok", "seconds"):
        table.add_column(col, justify="left" if col == "role" else "right")
    rows = cost_rows(usages)
    for role, calls, pt, ct, secs in rows:
        table.add_row(role, str(calls), str(pt), str(ct), f"{secs:.1f}")
    if rows:
        table.add_row("[bold]total[/bold]", str(sum(r[1] for r in rows)),
                      str(sum(r[2] for r in rows)), str(sum(r[3] for r in rows)),
                      f"{sum(r[4] for r in rows):.1f}")
    return table


def result_markup(final) -> list[str]:
    lines = [f"{STATUS_LINE.get(final.status, final.status)} ({final.directive}) — "
             f"{escape(final.summary)}"]
    if final.answer:
        lines.append("[bold]answer:[/bold] " + escape(final.answer))
    else:
        out = format_output(final.output)
        if out and out.strip() != final.summary.strip():
            lines.append(escape(out))
    for check in final.checks[:6]:
        lines.append("[dim]checked:[/dim] " + escape(check))
    for item in final.unverified[:4]:
        lines.append("[yellow]not verified:[/yellow] " + escape(item))
    if final.completed:
        lines.append("[green]completed:[/green] " + escape("; ".join(final.completed)))
    if final.failed:
        lines.append("[red]failed:[/red] " + escape("; ".join(final.failed)))
    if final.changed:
        lines.append("[dim]changed in the workspace:[/dim] " + escape(", ".join(final.changed[:20])))
    for refusal in final.law1:
        lines.append(f"[yellow]{escape(refusal)}[/yellow]")
    return lines
