"""Worker for the first-message test: N times, a brand-new publisher (its own BusClient and ZeroMQ
context) joins the bus, publishes exactly one message and leaves at once.

usage: spawn_publisher.py FIRST_TRIAL COUNT   (prints nothing; exit 0 when every start succeeded)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.bus import BusClient  # noqa: E402
from protocol.messages import EffectorStarted  # noqa: E402
from protocol.settings import load_settings  # noqa: E402


def main() -> int:
    first, count = int(sys.argv[1]), int(sys.argv[2])
    settings = load_settings()
    for trial in range(first, first + count):
        client = BusClient("spawner", settings=settings, heartbeat=False).start()
        client.publish(EffectorStarted(task_id="first-message", subtask_id=f"trial-{trial}",
                                       pid=os.getpid(), spawner=client.node))
        client.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
