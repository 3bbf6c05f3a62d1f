"""A role process for the foundation tests, run through the real role runtime (`run_role`).

Behaviour (role name from ARTOO_PROBE_ROLE, default "probe"):
* every catalogue type published with task `rt-out` is validated and re-published with task
  `rt-back` (cross-process round trip);
* EffectorStarted messages are counted (`handled`, `last` subtask id);
* SubTaskAssign is a work message it consumes (ack=True): each handling appends a line
  `<message id> <subtask id>` to $ARTOO_HOME/handled.log, the ground truth for exactly-once;
* MemoryQuery is answered (request/reply) with its bus counters (and the collector's frozen and
  tracked object counts), so a test can ask a live process.
"""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.messages import MESSAGE_TYPES, MemoryResult  # noqa: E402
from services.runtime.role import run_role  # noqa: E402


def setup(client, settings):
    state = {"handled": 0, "last": ""}
    log_path = settings.home / "handled.log"
    log_file = open(log_path, "a", buffering=1)

    def echo(env, msg):
        client.publish(msg, task="rt-back")

    def count(env, msg):
        state["handled"] += 1
        state["last"] = msg.subtask_id

    def consume(env, msg):
        log_file.write(f"{env.id} {msg.subtask_id}\n")

    def stats(env, msg):
        heap = {"gc_frozen": gc.get_freeze_count(), "gc_tracked": len(gc.get_objects())}
        return MemoryResult(op="stats", stats={**client.stats(), **state, **heap})

    for type_name in MESSAGE_TYPES:
        client.on(type_name, echo, task="rt-out")
    client.on("EffectorStarted", count)
    client.on("SubTaskAssign", consume, ack=True)
    client.on("MemoryQuery", stats, request=True)
    client.heartbeat_info = lambda: dict(state)
    return log_file


if __name__ == "__main__":
    raise SystemExit(run_role(os.environ.get("ARTOO_PROBE_ROLE", "probe"), setup))
