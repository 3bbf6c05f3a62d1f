"""A task's LLM call budget, as the roles that bound it read it: which setting holds the
default, how much of it the task log says is left, and the least a checked round needs."""
from __future__ import annotations

import os
from typing import Optional

from services.runtime import local_model, tasklog

ROUND_MIN_CALLS = 2        # a round: one executor call and one independent check


def budget_field(env) -> str:
    """The setting that holds a task's default LLM call budget: the bundled model's own when the
    executor tier runs on it (no TOOL_BASE_URL / OPENAI_BASE_URL)."""
    return "local_task_llm_calls" if local_model.tier_uses_local("TOOL", env) else "task_llm_calls"


def calls_left(settings, task_id: str, max_llm_calls: Optional[int]) -> Optional[int]:
    """What is left of a task's LLM call budget (the run's --max-llm-calls, else the setting
    `budget_field` names), counted from the task log's llm_call events; None = no bound."""
    budget = max_llm_calls
    if budget is None:
        budget = getattr(settings, budget_field(os.environ))
    if not budget:
        return None
    spent = tasklog.count(settings.tasks_dir, task_id, "llm_call")
    return max(0, budget - spent)
