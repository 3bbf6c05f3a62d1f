"""How a role process runs: logging, its instance number, the bus client, clean SIGTERM shutdown.

Every role module's `main()` calls `run_role(role, setup)`. `setup(client)` registers handlers and
timers on the client (and may return an object with `close()` for shutdown). supervisord sets
ARTOO_INSTANCE (its process_num) and ARTOO_INSTANCES (numprocs) for scalable roles.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from protocol.bus import BusClient
from protocol.settings import Settings, load_settings

from . import __version__


def configure_logging(role: str) -> None:
    level = logging.DEBUG if os.environ.get("ARTOO_DEBUG") else logging.INFO
    logging.basicConfig(stream=sys.stdout, level=level,
                        format=f"%(asctime)s {role}[%(process)d] %(levelname)s %(name)s: %(message)s")


def instance_from_env() -> tuple[int, int]:
    return int(os.environ.get("ARTOO_INSTANCE", "0")), int(os.environ.get("ARTOO_INSTANCES", "1"))


def run_role(role: str, setup: Callable[[BusClient, Settings], Any],
             settings: Settings | None = None) -> int:
    """Run one role process until SIGTERM/SIGINT; returns the process exit code."""
    configure_logging(role)
    log = logging.getLogger(f"artoo.{role}")
    settings = settings or load_settings()
    instance, instances = instance_from_env()
    client = BusClient(role, instance=instance, instances=instances, settings=settings,
                       version=__version__,
                       outbox=Path(settings.home) / "state" / "outbox" / f"{role}-{instance}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    resource = setup(client, settings)
    try:
        client.start()
    except Exception as exc:
        log.error("could not join the bus: %s", exc)
        return 1
    log.info("%s ready as %s (instance %d/%d)", role, client.node, instance, instances)
    code = 0
    while not stop.wait(0.5):
        if client.wait_stopped(0):
            log.error("bus loop ended unexpectedly; exiting so supervisord restarts us")
            code = 1
            break
    client.state = "stopping"
    if resource is not None and hasattr(resource, "close"):
        try:
            resource.close()
        except Exception:
            log.exception("close failed")
    client.stop(drain_s=1.0)
    return code
