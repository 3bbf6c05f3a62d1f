"""The planner's memory calibration protocol (seeds/000 §4.5): code only, no LLM call.

    text, recall, must_not = calibrate(client, spec, blocked_tools, blocked_targets, settings)

1. Tags: space = `intent:<slug>` from the TaskSpec's stable intent slug, entity = `env:local`.
2. One `calibrate` request to the memory process = QueryC (C/T rules of the tag, plus the operator's
   rules in `global:user`; each hit resets its recall clock) + QueryMK (attention, decision, action
   and the strongest contributing Megrams).
3. Lines: C rules σ > 0 → SHOULD PREFER, σ ≤ 0 → MUST NOT; the action maps Exploit → SHOULD PREFER,
   Avoid → MUST NOT, Caution → CAUTION, Ignore → nothing — each line carrying the concrete content of
   a strongest contributing Megram, not a generic phrase. At most `memory_max_calibration_entries`
   (10) memory entries, rules first.
4. The merged MUST NOT set = memory Avoid rules (C/T, σ ≤ 0) ∪ GGS blocked_tools ∪ blocked_targets,
   returned as strings: the rule text, `tool:<name>`, `target:<value>` (the memory tag conventions),
   and rendered as MUST NOT lines too.

If memory does not answer in time the planner still gets the GGS constraints and an honest note;
planning never waits on memory beyond `request_timeout_s`. The caller publishes the returned
MemoryRecall (planner → memory, display only); this module logs `memory_query` to the task log.
"""
from __future__ import annotations

import logging
from typing import Iterable

from protocol.bus import BusTimeout
from protocol.messages import Megram, MemoryQuery, MemoryRecall, MemoryResult, SopRecord, TaskSpec
from protocol.settings import Settings, load_settings

from services.runtime.mkct import ENV_LOCAL, intent_space, target_entity, tool_space

from services.runtime import tasklog
from services.safety.tools import one_line

log = logging.getLogger("artoo.calibration")

LINE_CHARS = 300          # one memory line in the prompt (small local models read ~50 tokens/s)

_RULE_LABEL = {True: "SHOULD PREFER (proven rule)", False: "MUST NOT (proven rule)"}
_ACTION_LABEL = {
    "Exploit": "SHOULD PREFER (worked before)",
    "Avoid": "MUST NOT (failed before)",
    "Caution": "CAUTION (mixed results before — confirm each step)",
}


MEMORY_LINE = tuple(label.split(" (")[0] for label in (*_RULE_LABEL.values(),
                                                       *_ACTION_LABEL.values()))


def without_memory(context: str) -> str:
    """A subtask's context less the memory's lines (each one line, by `_clip`). How a method
    fared before is advice for the executor; a checker shown it copies that method, or a value
    a recalled command carried (`printf 250.0 > total.txt`), and is no longer independent."""
    return "\n".join(line for line in context.splitlines()
                     if not line.startswith(MEMORY_LINE)).strip()


def without_blocks(context: str, tools: Iterable[str]) -> str:
    """The context less the lines that block `tools` (GGS's, by `build_constraints`, and a local
    replan's "Do not use: …"), for an executor that does not apply those blocks: told not to
    use its only tool, the model repeated a tried command or gave up."""
    tools = set(tools)

    def blocks(line: str) -> bool:
        named = {t.strip() for t in line.removeprefix("Do not use: ").split(",")}
        return any(line.startswith(f"MUST NOT use tool: {t} ") for t in tools) or (
            line.startswith("Do not use: ") and named <= tools)
    return "\n".join(line for line in context.splitlines() if not blocks(line)) if tools \
        else context


def _clip(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dedup(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _action_megrams(action: str, megrams: list[Megram]) -> list[Megram]:
    """The strongest contributors that carry the action's message: successes for Exploit,
    failures for Avoid, both for Caution (already ordered strongest first by the server)."""
    with_content = [m for m in megrams if m.content.strip()]
    if action == "Exploit":
        return [m for m in with_content if m.sigma > 0]
    if action == "Avoid":
        return [m for m in with_content if m.sigma < 0]
    if action == "Caution":
        return with_content
    return []


def build_constraints(result: MemoryResult | None, blocked_tools: Iterable[str] = (),
                      blocked_targets: Iterable[str] = (), max_entries: int = 10
                      ) -> tuple[list[str], list[str], int, int]:
    """Pure mapping from a calibrate result (None = memory unavailable) to
    (lines, must_not, rules used, megrams used). Memory lines are capped at max_entries."""
    memory_lines: list[tuple[str, str]] = []       # (label, content)
    must_not: list[str] = []
    rules_used = megrams_used = 0
    seen: set[str] = set()
    if result is not None:
        sops: list[SopRecord] = sorted(result.sops, key=lambda s: s.sigma > 0)  # MUST NOT first
        for sop in sops:
            content = _clip(sop.content)
            if not content or content in seen or len(memory_lines) >= max_entries:
                continue
            seen.add(content)
            memory_lines.append((_RULE_LABEL[sop.sigma > 0], content))
            rules_used += 1
            if sop.sigma <= 0:
                must_not.append(" ".join(sop.content.split()))
        label = _ACTION_LABEL.get(result.action)
        if label:
            for m in _action_megrams(result.action, result.megrams):
                content = _clip(m.content)
                if content in seen or len(memory_lines) >= max_entries:
                    continue
                seen.add(content)
                memory_lines.append((label, content))
                megrams_used += 1
    tools = _dedup(t.strip() for t in blocked_tools)
    targets = _dedup(t.strip() for t in blocked_targets)
    lines = [f"{label}: {content}" for label, content in memory_lines
             if label.startswith("MUST NOT")]
    lines += [f"MUST NOT use tool: {t} (blocked by GGS)" for t in tools]
    # a program as its first line and its length: shown whole (shell-quoted, as it ran) the
    # 1.5B copied its `'"'"'` quoting into its next program (dev avg-200-latency at 65612b9:
    # KeyError '"\'status\'"'); code refuses a repeat of the call itself (Executor.tried)
    lines += [f"MUST NOT use again: {one_line(t)} (failed before, blocked by GGS)"
              for t in targets]
    lines += [f"{label}: {content}" for label, content in memory_lines
              if not label.startswith("MUST NOT")]
    must_not = _dedup(must_not + [tool_space(t) for t in tools]
                      + [target_entity(t) for t in targets])
    return lines, must_not, rules_used, megrams_used


def calibrate(client, spec: TaskSpec | str, blocked_tools: Iterable[str] = (),
              blocked_targets: Iterable[str] = (), settings: Settings | None = None, *,
              task_id: str = "", entity: str = ENV_LOCAL, timeout: float | None = None
              ) -> tuple[str, MemoryRecall, list[str]]:
    """Run the calibration protocol for one plan/replan. `spec` is the TaskSpec or its intent slug.
    Returns (constraint text for the planner prompt, MemoryRecall to publish, merged MUST NOT)."""
    settings = settings or load_settings()
    if isinstance(spec, TaskSpec):
        slug, task_id = spec.intent_slug, task_id or spec.task_id
    else:
        slug = spec
    space = intent_space(slug)
    blocked_tools, blocked_targets = list(blocked_tools), list(blocked_targets)
    cap = settings.memory_max_calibration_entries
    result: MemoryResult | None = None
    note = ""
    try:
        _, result = client.request(MemoryQuery(op="calibrate", space=space, entity=entity,
                                               n=cap, task_id=task_id),
                                   to="memory", timeout=timeout or settings.request_timeout_s)
        if not result.ok:
            note, result = f"memory refused the calibration: {result.error}", None
    except BusTimeout as exc:
        note = f"memory unavailable: {exc}"
    if note:
        log.warning("%s: %s", task_id or space, note)
    lines, must_not, rules_used, megrams_used = build_constraints(
        result, blocked_tools, blocked_targets, cap)
    text = "\n".join(lines)
    recall = MemoryRecall(task_id=task_id, space=space, entity=entity, sops=rules_used,
                          recent=megrams_used,
                          attention=round(result.attention, 6) if result else 0.0,
                          decision=round(result.decision, 6) if result else 0.0,
                          action=result.action if result else "Ignore",
                          constraints=text, must_not=must_not)
    if task_id:
        tasklog.append(settings.tasks_dir, task_id, "memory_query", space=space, entity=entity,
                       sop_count=rules_used, megram_count=megrams_used, action=recall.action,
                       attention=recall.attention, decision=recall.decision,
                       must_not=must_not, error=note or None)
    return text, recall, must_not


__all__ = ["calibrate", "build_constraints"]
