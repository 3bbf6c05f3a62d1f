"""Helpers shared by the tap and auditor tests: a bus with its capture relay on, the tap and
auditor processes, and waiting on conditions of the audit log (never on sleeps)."""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Callable

import msgpack

from auditor import log as audit_log
from conftest import start_process, stop_process, wait_bus_ready
from services.runtime.bus import query_control


def wait_until(predicate: Callable[[], object], timeout: float, what: str,
               interval: float = 0.05):
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - e.g. a socket not there yet
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc})" if last_exc else ""))


def start_bus(settings, env: dict | None = None):
    """The bus proxy with capture on (the capture relay buffers until a tap connects)."""
    proc = start_process(["-m", "services.runtime.bus"], {"ARTOO_CAPTURE": "1", **(env or {})}, "bus")
    try:
        wait_bus_ready(settings)
    except BaseException:       # never ready (a loaded machine): stop it, or it outlives the test
        stop_process(proc)
        raise
    return proc


def capture_stats(settings) -> dict:
    return query_control(settings, "capture", timeout_s=2.0)["capture"]


def start_tap(settings, env: dict | None = None, connected_before: int = 0):
    """The tap process; returns once the capture relay has seen it connect."""
    proc = start_process(["-m", "auditor.tap"], env or {}, "tap")
    wait_until(lambda: capture_stats(settings)["tap_connections"] > connected_before
               and capture_stats(settings)["tap_connected"], 20, "the tap to connect")
    return proc


def log_dir(settings) -> Path:
    return settings.audit_dir / "log"


def logged_envelopes(settings) -> list[dict]:
    """Every bus message in the audit log, decoded (msgpack map), in log order."""
    out = []
    for rec in audit_log.iter_records(log_dir(settings)):
        if rec.kind == audit_log.MSG:
            env = msgpack.unpackb(rec.payload, raw=False)
            env["_seq"] = rec.seq
            env["_epoch"] = rec.epoch
            out.append(env)
    return out


def id_counts(settings, nodes: set[str]) -> Counter:
    return Counter(e["id"] for e in logged_envelopes(settings) if e.get("node") in nodes)
