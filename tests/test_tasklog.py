"""The decision log's reader and its counter (services/runtime/tasklog.py) on a real file."""
from __future__ import annotations

import json

from services.runtime import tasklog


def test_count_agrees_with_reading_every_event(tmp_path):
    run = "run-count"
    tasklog.append(tmp_path, run, "task_begin", raw_input="count the calls")
    # a prompt that quotes the log's own format, as a string: escaped, so never a line's start
    tasklog.append(tmp_path, run, "llm_call", role="planner",
                   prompt='{"kind": "llm_call", "ts": 1}\n{"kind": "llm_call",')
    tasklog.append(tmp_path, run, "llm_call", role="executor", response="ünïcode ✓")
    tasklog.append(tmp_path, run, "llm_calls", role="x")          # another kind, same prefix
    tasklog.append(tmp_path, run, "tool_call", kind_of="llm_call")
    with open(tasklog.log_path(tmp_path, run), "ab") as fh:
        fh.write(b'{"kind": "llm_call", broken\n')               # damaged: read() skips it
    events = list(tasklog.read(tmp_path, run))
    assert sum(e["kind"] == "llm_call" for e in events) == 2
    assert tasklog.count(tmp_path, run, "llm_call") == 3           # it counts the damaged one
    assert tasklog.count(tmp_path, run, "llm_calls") == 1
    assert tasklog.count(tmp_path, "no-such-run", "llm_call") == 0
    assert json.loads(tasklog.log_path(tmp_path, run).read_text().splitlines()[1])["prompt"] \
        .startswith('{"kind"')


def test_a_lifecycle_read_of_only_its_kinds_derives_the_same_trail(tmp_path):
    """transition_publisher reads the run's first event and the lifecycle kinds only: the trail,
    and what each event causes, are those of the whole log."""
    from services.runtime import lifecycle
    run = "run-life"
    big = "x" * 20000
    tasklog.append(tmp_path, run, "llm_call", role="perceiver", prompt=big)   # first: creates it
    for kind, extra in [("task_begin", {}), ("llm_call", {"prompt": big}),
                        ("plan", {"plan_round": 0}), ("tool_call", {"tool": "shell"}),
                        ("approval", {"subtask_id": "s1", "command": "rm -r x", "approved": True,
                                      "decided_by": "op"}),
                        ("merge_verdict", {"plan_round": 0}), ("llm_call", {"prompt": big}),
                        ("replan", {"plan_round": 0, "gap_summary": "more"}),
                        ("plan_directive", {"replan_round": 1, "directive": "replan"}),
                        ("plan", {"plan_round": 1}), ("task_end", {"status": "verified"})]:
        tasklog.append(tmp_path, run, kind, **extra)
    whole = list(tasklog.read(tmp_path, run))
    some = list(tasklog.read(tmp_path, run, kinds=lifecycle.KINDS))
    assert some[0] == whole[0] and len(some) < len(whole)
    assert lifecycle.derive(some).entries == lifecycle.derive(whole).entries
    assert len(lifecycle.derive(whole).entries) >= 6
    for event in whole:
        if event["kind"] in lifecycle.KINDS:
            assert lifecycle.caused_by(some, event) == lifecycle.caused_by(whole, event)


def test_kinds_logged_names_only_the_kinds_a_run_logged(tmp_path):
    assert tasklog.kinds_logged(tmp_path, "run-none", tasklog.ENDED) == set()   # no log yet
    tasklog.append(tmp_path, "run-a", "task_begin", intent="x")
    tasklog.append(tmp_path, "run-a", "llm_call", prompt='{"kind": "task_end"}')  # quoted, not one
    wanted = tasklog.BEGUN
    assert tasklog.kinds_logged(tmp_path, "run-a", wanted) == {"task_begin"}
    tasklog.append(tmp_path, "run-a", "task_end", status="accepted")
    assert tasklog.kinds_logged(tmp_path, "run-a", wanted) == {"task_begin", "task_end"}
