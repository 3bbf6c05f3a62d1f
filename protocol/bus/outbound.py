"""The sending half of BusClient: numbering, encoding, signing and sending frames. Any thread
calls these under the client's send lock (the `_locked` ones expect it held), which keeps each
stream's sequence in order on the wire and the PUB socket used by one thread at a time."""
from __future__ import annotations

import msgspec

from .. import accel
from ..envelope import Envelope
from .common import LRU_CAP, Pending

ENCODE = msgspec.msgpack.Encoder().encode  # = envelope.encode's; used under the send lock only


class Outbound:
    """Mixin of BusClient (its state is set up in BusClient.__init__)."""

    def _send_env(self, env: Envelope, topic: bytes, pending: Pending | None = None
                  ) -> list[bytes]:
        wire = env.to_wire()
        with self._send_lock:
            frames = self._send_wire_locked(topic, wire, pending)
        env.seq = wire["seq"]
        return frames

    def _send_wire_locked(self, topic: bytes, wire: dict, pending: Pending | None = None
                          ) -> list[bytes]:
        """Number, encode, sign and send one envelope (its wire map, `seq` filled in here); the
        caller holds the send lock, which keeps each stream's sequence in order on the wire."""
        wire["seq"] = self._next_seq(topic)
        # = envelope.encode: the same bytes; one encoder, under the lock
        return self._send_payload_locked(topic, ENCODE(wire), wire["id"], pending)

    def _next_seq(self, topic: bytes) -> int:
        """The next sequence number of the topic's stream (under the send lock)."""
        stream = topic.split(b"/", 1)[0]  # = stream_of(topic), inlined on the hot path
        seqs = self._seq
        seq = seqs[stream] = seqs.get(stream, 0) + 1
        if len(seqs) > LRU_CAP:  # directed streams to short-lived effectors come and go
            for key in list(seqs)[: len(seqs) // 2]:
                if key.startswith(b"@"):
                    del seqs[key]
        return seq

    def _send_payload_locked(self, topic: bytes, payload: bytes, msg_id: str = "",
                             pending: Pending | None = None) -> list[bytes]:
        """Sign and send an encoded envelope as it is (no re-serialization, no copy); a work
        message's `pending` is registered before the send, so its ack cannot arrive first."""
        signer = self._signer
        frames = [topic, payload] if signer is None else [topic, payload,
                                                           signer.mac(topic, payload)]
        if pending is not None:
            pending.frames = frames
            old = self._pending.get(msg_id)
            if old is not None:     # the same message again under its id, still unacked
                _merge(pending, old)
            self._pending[msg_id] = pending
        if self._pub_live:
            try:
                self._send_raw(frames)   # one C call for the whole message (protocol/accel.py)
                self.sent += 1
            except accel.SEND_ERRORS as exc:  # HWM with NODROP, or the context going away
                self._note("send_error", f"send failed: {exc}")
        return frames

    def _send_frames(self, frames: list[bytes]) -> None:
        """Send frames already built (a re-send, a cached reply) as they are."""
        with self._send_lock:
            if not self._pub_live:
                return
            try:
                self._send_raw(frames)
                self.sent += 1
            except accel.SEND_ERRORS as exc:  # HWM with NODROP, or the context going away
                self._note("send_error", f"send failed: {exc}")


def _merge(pending: Pending, old: Pending) -> None:
    """One wait for a message sent twice under one id before its ack (a restarted sender's
    outbox copy and its own re-send): the acks already in count, and both callers are told."""
    pending.acked |= old.acked
    first, second = old.on_done, pending.on_done
    if first is not None:
        pending.on_done = first if second is None else (lambda ok: (first(ok), second(ok)))
