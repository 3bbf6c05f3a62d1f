"""The pipeline end to end on the real daemon (`artoo up`: bus, tap, auditor, memory, perceiver,
planner, spawner + effectors, meta-validator, GGS) with the scripted LLM, plus the CLI's rendering
helpers and exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest import REPO
from protocol.envelope import Envelope
from protocol.messages import (ConversationalReply, FinalResult, LossBreakdown, MemoryRecall,
                               SubTaskOutcome)
from services import render
from services.cli_run import exit_code


# ---------------------------------------------------------------------------------------------
# rendering and exit codes (pure)
# ---------------------------------------------------------------------------------------------

def _env(type_name: str, sender: str, to: str | None = None) -> Envelope:
    return Envelope(type=type_name, body={}, sender=sender, node="n", task="run-x", to=to)


def test_flow_lines_escape_tags_and_show_verdicts():
    recall = MemoryRecall(task_id="run-x", space="intent:count-file", entity="env:local", sops=2,
                          action="Avoid", constraints="MUST NOT (proven rule): rm -rf [x]")
    line = render.describe(_env("MemoryRecall", "planner", "memory"), recall)
    assert "\\[intent:count-file / env:local]" in line and "Avoid" in line
    out = SubTaskOutcome(task_id="run-x", subtask_id="st0.1-ab", parent_task_id="run-x",
                         status="failed", failure_reason="No such file")
    line = render.describe(_env("SubTaskOutcome", "agentval", "metaval"), out)
    assert "failed" in line and "No such file" in line
    assert render.describe(_env("Heartbeat", "planner"), object()) is None


def test_decision_trail_and_cost_table():
    events = [
        {"kind": "memory_query", "space": "intent:x", "entity": "env:local", "sop_count": 1,
         "action": "Exploit", "attention": 1.5, "decision": 0.7},
        {"kind": "plan", "plan_round": 0, "subtasks": [{"sequence": 1}, {"sequence": 2}],
         "task_criteria": [{"text": "t"}]},
        {"kind": "llm_call", "role": "planner"},
        {"kind": "ggs_decision", "d": 0.5, "p": 0.2, "omega": 0.1, "l": 0.4, "grad_l": 0.0,
         "directive": "change_path", "rationale": "target missing"},
    ]
    trail = render.decision_trail(events)
    assert trail[0].startswith("memory") and "Exploit" in trail[0]
    assert "2 subtask(s) in 2 group(s)" in trail[1]
    assert "change_path" in trail[2] and len(trail) == 3
    rows = render.cost_rows([{"role": "planner", "prompt_tokens": 10, "completion_tokens": 5,
                              "latency_ms": 1500}, {"role": "perceiver", "latency_ms": 500},
                             {"role": "planner", "prompt_tokens": 1, "latency_ms": 500}])
    assert rows == [("perceiver", 1, 0, 0, 0.5), ("planner", 2, 11, 5, 2.0)]


def test_exit_codes():
    loss = LossBreakdown(D=0, P=0, Omega=0, L=0)
    assert exit_code(FinalResult(task_id="r", directive="accept", summary="", loss=loss)) == 0
    assert exit_code(FinalResult(task_id="r", directive="success", summary="")) == 0
    assert exit_code(FinalResult(task_id="r", directive="abandon", summary="")) == 1
    assert exit_code(ConversationalReply(task_id="r", answer="hi")) == 0
    assert exit_code(None) == 1


def test_run_without_a_daemon_exits_2_with_a_clear_message(tmp_path):
    env = {"ARTOO_HOME": str(tmp_path / "h"), "ARTOO_WORKSPACE": str(tmp_path / "w"),
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "count files"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "not running" in proc.stderr and "artoo up" in proc.stderr
    usage = subprocess.run([sys.executable, "-m", "services.cli", "run"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2
