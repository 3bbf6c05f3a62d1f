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
