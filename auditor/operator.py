"""The operator's channel to the auditor (DESIGN §4, §8): a unix socket in the run dir, mode 0600.

It is the one deliberate exception to "everything crosses the bus": it involves no agent, so no agent
can see, suppress or answer in the auditor's place. Protocol: one JSON line in
(`{"cmd": "report"}` or `{"cmd": "ping"}`), one JSON line out (`{"ok": true, "report": {...}}`).
"""
from __future__ import annotations

import json
import socket
from pathlib import Path

from protocol.settings import Settings

SOCKET_NAME = "audit.sock"


def socket_path(settings: Settings) -> Path:
    return settings.run_dir / SOCKET_NAME


def query(settings: Settings, cmd: str = "report", timeout_s: float = 5.0) -> dict:
    """Send one command to the running auditor; raises OSError (not running / no answer) or
    RuntimeError (the auditor refused)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(socket_path(settings)))
        sock.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    try:
        reply = json.loads(data)
    except ValueError:
        raise OSError("the auditor closed the connection without a complete answer") from None
    if not reply.get("ok"):
        raise RuntimeError(reply.get("error", "the auditor refused the request"))
    return reply


def request_report(settings: Settings, timeout: float = 5.0) -> dict:
    """The auditor's on-demand report (an AuditReport as a dict)."""
    return query(settings, "report", timeout)["report"]
