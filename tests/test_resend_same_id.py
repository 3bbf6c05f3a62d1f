"""A message persisted before it was acknowledged is re-sent under its original id.

GGS writes what it emits to an outbox on disk; when it is SIGKILLed before the consumer acked, the
restarted process re-sends the entry. The copy must carry the same message id, so the consumer's
de-dup drops it and the operator never sees two FinalResults. The CLI additionally drops a second
terminal message for a run it already finished (a re-send from an older outbox without ids)."""
from __future__ import annotations

import queue
import threading

from rich.console import Console

from protocol.messages import FinalResult, ReplanRequest
from services.cli.run import RunSession
from test_ggs_process import Harness, new_task, outcome  # noqa: F401 - reused harness

WAIT = 20.0


def test_send_and_publish_accept_a_fixed_message_id(bus_process, bus_clients):
    got: list = []
    cond = threading.Condition()

    def seen(env, msg):
        with cond:
            got.append((env.type, env.id))
            cond.notify_all()

    bus_clients("user", setup=lambda c: c.on("FinalResult", seen, ack=True))
    ggs = bus_clients("ggs")
    done = threading.Event()
    sent_id = ggs.send(FinalResult(task_id="t-1", directive="accept", summary="ok"), msg_id="fixed-1",
                       on_done=lambda ok: done.set())
    assert sent_id == "fixed-1" and done.wait(WAIT)
    # the same id again (a restarted sender): acked, but the handler does not run twice
    again = threading.Event()
    ggs.send(FinalResult(task_id="t-1", directive="accept", summary="ok"), msg_id="fixed-1",
             on_done=lambda ok: again.set())
    assert again.wait(WAIT)
    assert ggs.publish(FinalResult(task_id="t-2", directive="accept", summary="ok"), msg_id="pub-1") == "pub-1"
    with cond:
        assert cond.wait_for(lambda: ("FinalResult", "pub-1") in got, WAIT)
    assert got.count(("FinalResult", "fixed-1")) == 1


def test_two_sends_of_one_id_in_flight_at_once_both_hear_the_ack(bus_process, bus_clients):
    """A restarted sender can send one message twice before its ack: its outbox's copy (restored
    at start) and its own re-send (the scheduler re-sends a run it never saw acknowledged). The
    second wait must not replace the first: each caller hears the one ack (the scheduler's
    run stayed "not submitted" for good when its callback was the one dropped)."""
    ggs = bus_clients("ggs")
    first, second = threading.Event(), threading.Event()
    final = FinalResult(task_id="t-twice", directive="accept", summary="ok")
    ggs.send(final, msg_id="twice-1", on_done=lambda ok: ok and first.set())
    ggs.send(final, msg_id="twice-1", on_done=lambda ok: ok and second.set())
    # the consumer comes up only now: both sends wait on its one ack
    bus_clients("user", setup=lambda c: c.on("FinalResult", lambda env, msg: None, ack=True))
    assert second.wait(WAIT), "the second send never heard the ack"
    assert first.wait(WAIT), "the first send's wait was dropped"


def test_restarted_ggs_resends_its_final_result_under_the_same_id(bus_process, settings,
                                                                  bus_clients):
    h = Harness(settings, bus_clients)
    try:
        task = new_task("r")
        received: list = []
        accepting = threading.Event()

        got_it = threading.Event()

        def take(env, msg):
            received.append(env.id)
            got_it.set()

        h.user.stop()  # the harness's user acks everything; this test needs its own
        # a user that does not acknowledge this task's FinalResult until told to
        bus_clients("user", setup=lambda c: c.on(
            "FinalResult", take, ack=True, when=lambda env, _m: env.task == task
            and accepting.is_set()))
        first = h.start_ggs()
        h.task_spec(task)
        h.send_acked(h.metaval, ReplanRequest(
            task_id=task, intent="count files", intent_slug="count-files",
            outcomes=[outcome(task, "step", "matched", output=7)]), consumers=("ggs",))
        h.next_of("FinalResult", task, 1)
        first_id = next(e.id for e, _ in h.seen if e.type == "FinalResult" and e.task == task)
        first.kill()
        first.wait(10)
        second = h.start_ggs()
        # the restarted process re-sends from its outbox: same id, different node
        h.wait(lambda: any(e.type == "FinalResult" and e.task == task
                           and e.node != first_node(h, task) for e, _ in h.seen),
               what="the re-sent FinalResult")
        ids = {e.id for e, _ in h.seen if e.type == "FinalResult" and e.task == task}
        assert ids == {first_id}
        accepting.set()
        assert got_it.wait(WAIT), "the re-sent FinalResult never reached the user"
        # once acked GGS stops re-sending; every copy (both lives) carried the one id
        hb_after = len(h.heartbeats)
        h.wait(lambda: any(m.pid == second.pid and m.unacked == 0
                           for _, m in h.heartbeats[hb_after:]), what="outbox drained")
        assert received == [first_id]
        assert {e.id for e, _ in h.seen if e.type == "FinalResult" and e.task == task} == {first_id}
    finally:
        h.stop()


def first_node(h: Harness, task: str) -> str:
    return next(e.node for e, _ in h.seen if e.type == "FinalResult" and e.task == task)


def test_cli_drops_a_second_final_result_for_a_finished_run(bus_process, settings, bus_clients):
    session = RunSession(settings, Console(file=open("/dev/null", "w")), interactive=False,
                         quiet=True)
    try:
        run_id = "run-dup-1"
        session.queues[run_id] = queue.Queue()
        session.seen[run_id] = []
        ggs = bus_clients("ggs")
        for _ in range(2):  # two different ids: the bus de-dup cannot catch this one
            done, result = threading.Event(), []
            ggs.send(FinalResult(task_id=run_id, directive="accept", summary="done"),
                     on_done=lambda ok: (result.append(ok), done.set()))
            assert done.wait(WAIT) and result == [True]
        # both were acked, so both handlers already ran (the ack follows the handler)
        q = session.queues[run_id]
        items = [q.get_nowait() for _ in range(q.qsize())]
        assert [kind for kind, _e, _m in items].count("end") == 1
        # after forget() the run is still remembered as ended: a late copy is acked, not queued
        session.forget(run_id)
        late = threading.Event()
        ggs.send(FinalResult(task_id=run_id, directive="accept", summary="ok"), on_done=lambda ok: late.set())
        assert late.wait(WAIT)
    finally:
        session.close()
