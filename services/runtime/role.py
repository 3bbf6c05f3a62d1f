"""How a role process runs: logging, its instance number, the bus client, clean SIGTERM shutdown.

Every role module's `main()` calls `run_role(role, setup)`. `setup(client)` registers handlers and
timers on the client (and may return an object with `close()` for shutdown). supervisord sets
ARTOO_INSTANCE (its process_num) and ARTOO_INSTANCES (numprocs) for scalable roles.
"""
from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from protocol.bus import BusClient
from protocol.messages import TaskTransition
from protocol.routes import TRANSITION_ROLES
from protocol.settings import Settings, load_settings, parse_instances

from . import __version__, lifecycle, tasklog, telemetry


def settle_heap() -> None:
    """Put what a process built while it started (its modules, classes, models and clients:
    35-100k objects) out of the cycle collector's reach. They live as long as the process, yet
    every full collection walked them all, with the role stalled: in 120 pipeline tasks the
    planner and the meta-validator each ran one, of 49-68 ms; with them frozen, none ran after
    start-up. Refcounting still frees them; only a cycle among them that becomes garbage later
    is kept."""
    gc.collect()
    gc.freeze()


def configure_logging(role: str) -> None:
    level = logging.DEBUG if os.environ.get("ARTOO_DEBUG") else logging.INFO
    logging.basicConfig(stream=sys.stdout, level=level,
                        format=f"%(asctime)s {role}[%(process)d] %(levelname)s %(name)s: %(message)s")
    if level > logging.DEBUG:
        # The HTTP client logs every LLM request at INFO: a formatted line and a write on the
        # task's path per call, which the LlmUsage telemetry already records.
        for name in ("httpx", "httpx2"):
            logging.getLogger(name).setLevel(logging.WARNING)


# the roles whose instances share tasks by partition (numprocs in supervisord.conf), maybe on
# several hosts; the others run one instance per bus (or, the spawner, one per host)
PARTITIONED = ("perceiver", "planner", "metaval", "ggs")


def instance_from_env(settings: Settings | None = None) -> tuple[int, int]:
    """(instance, instances): supervisord's process_num/numprocs, shifted to this host's range
    when the role's instances span several hosts (ARTOO_HOST_INSTANCES FIRST/TOTAL)."""
    num = int(os.environ.get("ARTOO_INSTANCE", "0"))
    count = int(os.environ.get("ARTOO_INSTANCES", "1"))
    first, total = parse_instances(settings.host_instances) if settings else (0, 0)
    if not total:
        return num, count
    return first + num, max(total, first + count)


def transition_publisher(client: BusClient, as_role: str | None = None):
    """The tasklog hook that publishes each lifecycle move this process's events cause (one
    read of the run's log per lifecycle event, a handful per task)."""
    if (as_role or client.role) not in TRANSITION_ROLES:
        return None

    def publish(tasks_dir: Path, run_id: str, event: dict) -> None:
        if event.get("kind") not in lifecycle.KINDS:
            return
        events = list(tasklog.read(tasks_dir, run_id, kinds=lifecycle.KINDS))
        for move, refused in lifecycle.caused_by(events, event):
            client.publish(TaskTransition(task_id=run_id, from_state=move["from"] or "",
                                          to_state=move["to"], actor=move["actor"],
                                          reason=move["reason"][:300], refused=refused),
                           as_role=as_role)
    return publish


def run_role(role: str, setup: Callable[[BusClient, Settings], Any],
             settings: Settings | None = None) -> int:
    """Run one role process until SIGTERM/SIGINT; returns the process exit code."""
    configure_logging(role)
    log = logging.getLogger(f"artoo.{role}")
    settings = settings or load_settings()
    instance, instances = instance_from_env(settings if role in PARTITIONED else None)
    client = BusClient(role, instance=instance, instances=instances, settings=settings,
                       version=__version__,
                       outbox=Path(settings.home) / "state" / "outbox" / f"{role}-{instance}")
    telemetry.init(role, node=client.node, client=client)   # off unless OTEL_* ask for traces
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tasklog.set_after_append(transition_publisher(client))
    resource = setup(client, settings)
    settle_heap()
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
    telemetry.shutdown()
    return code
