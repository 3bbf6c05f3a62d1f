"""The receiving half of BusClient: decoding, sequence gaps, the handshake echo, acks and dispatch
to handlers (de-duplicated, partitioned, threaded or not). Runs on the loop thread.

With signing on (protocol/signing.py) a frame is acted on only if its MAC checks out, and a valid
frame captured and sent again (a replay) is not acted on twice:
* work messages (ack=True) and requests are de-duplicated by envelope id, as for every re-send —
  a replayed one is at most acknowledged again;
* for every other handler the exact frame is remembered by its MAC (the last LRU_CAP frames) and
  a byte-identical copy is dropped (counted in `duplicates`: a work message's own re-sends, which
  are byte-identical, count there too) — a legitimate re-send after a restart has a new node and
  seq, so a new MAC, and is still seen;
* a signed envelope older than `bus_max_age_s` is refused as `stale` (the window never goes below
  ack_give_up_s + 60 s, because a work message is re-sent with its original timestamp that long).
"""
from __future__ import annotations

import logging
import time
from typing import Any

from .. import tracecontext
from ..envelope import Envelope, ProtocolError, decode, parse_body
from ..messages import Body
from .common import ALL, DEFER, SENDERS_CAP, Subscription
from .cpulatency import QUIET

log = logging.getLogger("artoo.bus")


class Inbound:
    """Mixin of BusClient (its state is set up in BusClient.__init__)."""

    def _reject(self, exc: ProtocolError) -> None:
        self.rejected[exc.reason] += 1
        self._note(exc.reason, f"rejected frame: {exc}")

    def _check_frames(self, frames: list[bytes]) -> Envelope | None:
        """The envelope of a received frame that passes every check (its MAC, its shape, its
        age), or None — counted as rejected, with the reason logged (any thread)."""
        try:
            _topic, env = decode(frames, self.settings.max_frame_bytes, self._signer)
        except ProtocolError as exc:
            self._reject(exc)
            return None
        if self._max_age and env.ts < time.time() - self._max_age:
            self._reject(ProtocolError("stale", f"{env.type} {env.id} from {env.node} sent at "
                                                f"{env.ts:.0f}, older than {self._max_age:.0f}s"))
            return None
        if self._cpu_touch is not None and env.type not in QUIET:
            self._cpu_touch()
        return env

    def _on_frames(self, frames: list[bytes]) -> None:
        self.received += 1
        env = self._check_frames(frames)
        if env is None:
            return
        topic = frames[0]
        stream = topic.split(b"/", 1)[0]  # = stream_of(topic), inlined on the hot path
        mine = topic.startswith(self._my_prefix)
        if mine or self._all_subscribed or stream in self._full_streams:
            key = (env.node, stream)
            last = self._last_seq.get(key)
            if last is not None and env.seq > last + 1:
                self.gaps[env.node] += env.seq - last - 1
                if len(self.gaps) > 512:
                    for node, _ in self.gaps.most_common()[256:]:
                        del self.gaps[node]
            if last is None or env.seq > last:
                if last is None and len(self._last_seq) >= SENDERS_CAP * 2:
                    for old in list(self._last_seq)[:SENDERS_CAP]:  # oldest senders first
                        del self._last_seq[old]
                self._last_seq[key] = env.seq
        tname = env.type
        if mine:
            if tname == "Hello":
                if env.body.get("nonce") == self._hello_nonce:
                    self._hello_nonce = ""
                    self._ready.set()
                    for ev in self._hello_waiters:
                        ev.set()
                    self._hello_waiters.clear()
                return
            if tname == "Ack":
                self._on_ack(env)
                return
        subs = self._by_type.get(tname)
        if self._wildcard:
            subs = (subs or []) + self._wildcard
        if not subs:
            return
        elsewhere = not mine and topic[:1] == b"@"  # directed at another process
        body = None
        fresh = None  # this exact frame not dispatched before (None: not looked up yet)
        for sub in subs:
            if not sub.plain:  # a plain observer has none of these filters: the hot path
                if sub.task and env.task != sub.task:
                    continue
                if (elsewhere and sub.type_name != ALL) or (sub.directed and not mine):
                    continue
                if sub.partition and (not self.owns(env.task) or (
                        sub.ack and self.membership.fenced(env.task, env.ts))):
                    continue  # not ours (or not yet: membership.py); unacknowledged, so re-sent
            elif elsewhere:
                continue
            if sub.raw:
                msg = None
            else:
                if body is None:
                    try:
                        body = parse_body(env)
                    except ProtocolError as exc:
                        self._reject(exc)
                        return
                msg = body
            if not sub.plain:
                if sub.when is not None:
                    try:
                        if not sub.when(env, msg):
                            continue
                    except Exception:
                        continue
                if sub.request:
                    cached = self._replies.get(env.id)
                    if cached is not None:
                        self._send_frames(cached)
                        continue
                    if env.id in self._answering:
                        continue  # a re-sent request whose first copy is still being answered
                    self._answering.add(env.id)
                if sub.ack:
                    state = self._seen.get(env.id)
                    if state == "done":
                        self._ack(env, role=sub.ack_role)
                        continue
                    if state == "running":
                        continue
                    self._seen.put(env.id, "running")
                    self.busy[env.task] += 1
            # the replay filter (signing on): a handler that neither acknowledges nor answers
            # gets a byte-identical frame once, unless it asked for every copy
            if (self._signer is not None and not sub.ack and not sub.request
                    and not sub.every_copy):
                if fresh is None:
                    fresh = self._first_copy(frames[2])
                if not fresh:
                    continue
            if sub.plain:  # run here on the loop thread, in the message's trace context
                token = tracecontext.enter(env.trace, env.task) if self.tracing else None
                try:
                    sub.fn(env, msg)
                except Exception:
                    self.handler_errors += 1
                    log.exception("%s: handler for %s failed", self.node, env.type)
                finally:
                    if token is not None:
                        tracecontext.CURRENT.reset(token)
            elif sub.threaded:
                with self._in_flight_lock:
                    self._in_flight += 1
                self._pool.submit(self._run_handler, sub, env, msg, True)
            else:
                self._run_handler(sub, env, msg, False)

    def _first_copy(self, mac: bytes) -> bool:
        """The replay filter: True the first time this exact frame (its MAC) is seen; a copy
        after that is counted in `duplicates` and not dispatched again."""
        delivered = self._delivered     # a SeenSet, its two generations read here directly
        young = delivered.young
        if mac in young or mac in delivered.old:
            self.duplicates += 1
            return False
        young.add(mac)
        if len(young) >= delivered.cap:
            delivered.old, delivered.young = young, set()
        return True

    def _run_handler(self, sub: Subscription, env: Envelope, msg: Any, threaded: bool) -> None:
        ok, error, result = True, None, None
        # the handler runs in the message's trace context (only with tracing on)
        token = tracecontext.enter(env.trace, env.task) if self.tracing else None
        try:
            result = sub.fn(env, msg)
        except Exception as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}"
            self.handler_errors += 1
            log.exception("%s: handler for %s failed", self.node, env.type)
        finally:
            if token is not None:
                tracecontext.CURRENT.reset(token)
            if threaded:
                with self._in_flight_lock:
                    self._in_flight -= 1
        if sub.request:
            if isinstance(result, Body):
                self._submit(("reply", env, result, None))  # cached before it returns
            self._answering.discard(env.id)
        if sub.ack:
            def finish():
                left = self.busy[env.task] - 1
                if left > 0:
                    self.busy[env.task] = left
                else:
                    self.busy.pop(env.task, None)
                if result is DEFER:  # not ours after all: a re-sent copy is handled afresh
                    self._seen.pop(env.id, None)
                    self.deferred += 1
                    return
                self._seen.put(env.id, "done")
                self._ack(env, ok, error, role=sub.ack_role)
            self._call_in_loop(finish) if threaded else finish()

    def _on_ack(self, env: Envelope) -> None:
        ack_id = env.body.get("ack_id")
        p = self._pending.get(ack_id) if isinstance(ack_id, str) else None
        if p is None:
            return
        if env.body.get("ok") is False:
            log.warning("%s: %s %s handled with error by %s: %s", self.node, p.type_name, ack_id,
                        env.sender, env.body.get("error"))
        p.acked.add(env.sender)
        if p.consumers <= p.acked:
            del self._pending[ack_id]
            if self._outbox is not None:
                self._outbox.remove(ack_id)
            if p.on_done:
                try:
                    p.on_done(True)
                except Exception:
                    log.exception("%s: on_done callback failed", self.node)
