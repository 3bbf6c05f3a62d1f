"""Scripted-LLM reply builders for the pipeline roles (perceiver, planner, metaval).

Each returns the JSON value the role's LLM contract expects (services/perceiver.Perception,
services/planner.PlanReply, services/metaval.MergeVerdict), so tests read as the story they tell:

    llm.add("perceiver", perception("count the lines of a.txt"))
    llm.add("planner", plan(subtask("count lines", ["prints a number"])))
    llm.add("metaval", accept("3 lines", merged_output="3"))
"""
from __future__ import annotations

from typing import Any


def perception(intent: str, criteria: list[str] | None = None, *, scope: str | None = None,
               deadline: str | None = None, constraints: list[str] | None = None) -> dict:
    return {"needs_clarification": False, "question": "", "intent": intent,
            "success_criteria": criteria or [f"{intent} is done"], "scope": scope,
            "deadline": deadline, "constraints": constraints or []}


def clarify(question: str) -> dict:
    return {"needs_clarification": True, "question": question, "intent": ""}


def criterion(text: str, mode: str = "verifiable") -> dict:
    return {"text": text, "mode": mode}


def subtask(intent: str, criteria: list[str | dict] | None = None, *, sequence: int | None = 1,
            context: str = "", tools: list[str] | None = None) -> dict:
    crit = [criterion(c) if isinstance(c, str) else c for c in (criteria or [f"{intent} done"])]
    st: dict[str, Any] = {"intent": intent, "success_criteria": crit, "context": context,
                          "tools": tools or ["shell"]}
    if sequence is not None:
        st["sequence"] = sequence
    return st


def plan(*subtasks: dict, task_criteria: list[str | dict] | None = None) -> dict:
    return {"task_criteria": [criterion(c) if isinstance(c, str) else c
                              for c in (task_criteria or [])],
            "subtasks": list(subtasks)}


def empty_plan() -> dict:
    return {"task_criteria": [], "subtasks": []}


def accept(summary: str = "all criteria met", merged_output: Any = None,
           verdicts: list[tuple[str, str]] | None = None) -> dict:
    """verdicts: (criterion, "pass"/"fail") pairs; omitted → the LLM judged none individually."""
    return {"verdict": "accept", "summary": summary, "merged_output": merged_output,
            "task_criteria_verdicts": [{"criterion": c, "verdict": v, "evidence": "scripted"}
                                       for c, v in (verdicts or [])],
            "gap_summary": ""}


def reject(gap: str, verdicts: list[tuple[str, str]] | None = None,
           failure_class: str = "logical") -> dict:
    return {"verdict": "replan", "summary": "", "merged_output": None,
            "task_criteria_verdicts": [{"criterion": c, "verdict": v, "evidence": "scripted",
                                        "failure_class": failure_class if v == "fail" else ""}
                                       for c, v in (verdicts or [])],
            "gap_summary": gap}


PROSE = "Sure! I would first look at the files, then count them, and finally report the total."
INVALID_JSON = '{"task_criteria": [], "subtasks": [{"intent": "count", "success_criteria": [}'


def effector_responder(command: str, output: Any, *criteria: str):
    """Stateless executor + agentval responders for any number of identical tasks: the executor
    runs `command` on its first turn and reports `output` once a tool result is in its prompt; the
    validator finds every criterion met (R4a requires a successful tool record for that)."""
    from replies_effector import all_met, result, shell

    def executor(req):
        return result(output) if "Tool calls so far" in req.user else shell(command)

    def agentval(req):
        return all_met(*criteria)
    return executor, agentval
