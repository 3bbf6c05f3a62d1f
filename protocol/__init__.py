"""artoo's wire protocol: envelope, message catalogue, codec, topics, routes and the bus client.

Imported by every process; imports nothing else of ours.
"""
from .envelope import PROTOCOL_VERSION, Envelope, ProtocolError, owner, topic_for
from .messages import MESSAGE_TYPES
from .routes import ROUTES, WORK_TYPES, allowed
from .settings import Settings, load_settings

__all__ = ["PROTOCOL_VERSION", "Envelope", "ProtocolError", "owner", "topic_for", "MESSAGE_TYPES",
           "ROUTES", "WORK_TYPES", "allowed", "Settings", "load_settings"]
