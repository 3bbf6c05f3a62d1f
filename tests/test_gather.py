"""Observers take messages in bursts (protocol/bus/common.Gather, ARTOO_OBSERVER_GATHER_MS): a
real proxy, a publisher that spreads its messages out, an observer that loses none of them and
takes them in a few wake-ups instead of one each."""
from __future__ import annotations

import threading
import time

from audit_support import wait_until
from protocol.bus import ALL
from protocol.bus.common import Gather
from protocol.messages import LlmUsage


def _usage(i: int) -> LlmUsage:
    return LlmUsage(role="planner", tier="BRAIN", model="m", prompt_tokens=i, completion_tokens=1,
                    latency_ms=1.0, task_id="t-gather")


def test_an_observer_takes_a_spread_out_burst_in_a_few_wake_ups_and_loses_nothing(
        bus_process, bus_clients):
    seen: list[int] = []
    gather = Gather(0.3)
    observer = bus_clients("metrics", setup=lambda c: c.on(
        ALL, lambda e, m: seen.append(e.body["prompt_tokens"]) if e.type == "LlmUsage" else None,
        raw=True))
    observer.gather = gather
    sender = bus_clients("planner")
    sender.handshake()
    for i in range(20):      # 2 ms apart: without gathering, a wake-up each
        sender.publish(_usage(i))
        time.sleep(0.002)
    wait_until(lambda: len(seen) == 20, 10, "all 20 messages observed")
    assert seen == list(range(20))
    assert 1 <= gather.bursts <= 3, gather.bursts      # 20 wake-ups when taken as they come


def test_a_drain_that_stopped_at_its_limit_is_followed_at_once():
    gather = Gather(60.0)
    done = threading.Event()
    t = threading.Thread(target=lambda: (gather.before_drain(more_waiting=True), done.set()))
    t.start()
    assert done.wait(10), "waited although more was waiting"
    t.join()
    assert Gather(0).period_s == 0 and Gather(-1).period_s == 0
