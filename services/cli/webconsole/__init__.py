"""The read-only web console (`artoo web`): data.py reads, server.py serves, static/ is the page."""
from .server import LiveFeed, WebConsole

__all__ = ["LiveFeed", "WebConsole"]
