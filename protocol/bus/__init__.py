"""The bus client every artoo process uses (DESIGN §4): publish/subscribe through the proxy, the
readiness handshake, per-sender sequence numbers and gap counting, acknowledged work messages with
re-send and de-duplication, request/reply, heartbeats, and survival of any malformed input.

Threading model: one loop thread owns the ZeroMQ sockets. Handlers run on the loop thread unless
registered `threaded=True` (LLM and tool work), in which case they run on a small pool. The SUB
socket belongs to the loop thread alone. The PUB socket is shared under one lock (a mutex gives the
full memory barrier ZeroMQ asks for when a socket changes threads), so any thread publishes directly:
sequence number, encoding and send happen atomically, which keeps each stream's sequence in order on
the wire without a hop through the loop. Everything else (subscriptions, the handshake, de-dup state)
goes through a queue that wakes the loop via an eventfd. A thread that makes requests has a SUB
socket of its own for their replies (replies.py), used by it alone and closed by the loop at stop.
"""
from ..envelope import PROTOCOL_VERSION
from ..messages import Ack, Hello
from .client import BusClient
from .common import ALL, DEFER, BusTimeout

__all__ = ["BusClient", "BusTimeout", "ALL", "DEFER", "PROTOCOL_VERSION", "Ack", "Hello"]
