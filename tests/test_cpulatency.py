"""ARTOO_CPU_LATENCY=busy: a process holds a PM QoS wake-up latency request while it has bus work
and only then (protocol/bus/cpulatency.py) — on the real kernel device where the test may use it."""
from __future__ import annotations

import dataclasses
import os
import struct
import time

import pytest

from audit_support import wait_until
from protocol.bus.cpulatency import DEVICE, CpuLatency, check_mode, describe
from protocol.messages import MemoryQuery, MemoryResult

NO_REQUEST = 2_000_000_000   # the device's value with no request in force (PM_QOS_DEFAULT_VALUE)


def device_value() -> int | None:
    """The machine's current CPU wake-up latency constraint, µs (None: not readable here)."""
    try:
        fd = os.open(DEVICE, os.O_RDONLY)
    except OSError:
        return None
    try:
        return struct.unpack("=i", os.pread(fd, 4, 0))[0]
    finally:
        os.close(fd)


def test_the_request_is_made_on_work_and_dropped_after_the_linger(tmp_path):
    device = tmp_path / "dma"
    device.write_bytes(b"")
    hold = CpuLatency("busy", linger_s=5.0, device=str(device))
    assert hold.state == "idle" and hold.due_ms(time.monotonic()) is None
    hold.touch()
    assert hold.state == "held" and hold.holds == 1
    assert struct.unpack("=i", device.read_bytes()) == (0,)   # 0 µs: idle CPUs poll
    hold.touch()                                             # busy again: the same request
    assert hold.holds == 1
    assert 4000 < hold.due_ms(time.monotonic()) <= 5000
    assert hold.due_ms(time.monotonic() + 6.0) is None       # idle past the linger: dropped
    assert hold.state == "idle"
    hold.touch()
    assert hold.state == "held" and hold.holds == 2
    hold.close()
    assert not hold.held


def test_off_never_requests_and_a_bad_value_names_the_setting(tmp_path):
    hold = CpuLatency("off", device=str(tmp_path / "dma"))
    hold.touch()
    assert hold.state == "off" and not (tmp_path / "dma").exists()
    assert check_mode(" Busy ") == "busy" and check_mode("") == "off"
    with pytest.raises(ValueError, match="ARTOO_CPU_LATENCY.*'fast'"):
        CpuLatency("fast")


def test_an_unusable_device_is_reported_once_and_work_goes_on(tmp_path, caplog):
    hold = CpuLatency("busy", device=str(tmp_path / "missing" / "dma"))
    hold.touch()
    hold.touch()
    assert hold.state.startswith("unavailable:") and hold.holds == 0 and not hold.held
    assert sum("cannot request" in r.getMessage() for r in caplog.records) == 1


def test_a_forked_child_does_not_keep_its_parents_request(tmp_path):
    device = tmp_path / "dma"
    device.write_bytes(b"")
    hold = CpuLatency("busy", device=str(device))
    hold.touch()
    pid = os.fork()
    if pid == 0:   # the child: the request it inherited is not its own
        os._exit(0 if not hold.held and hold.state == "idle" else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert hold.held
    hold.close()


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel-device", "stand-in"])
def test_bus_work_holds_the_request_and_an_idle_bus_does_not(bus_process, bus_clients, settings,
                                                             tmp_path, kernel):
    """Real proxy, real clients: a handshake and heartbeats are no work; a request and its reply
    are, for both ends, until the linger has passed. On the kernel's device (where this test may
    write it: root) and on a stand-in file."""
    if kernel and not os.access(DEVICE, os.W_OK):
        pytest.skip(f"{DEVICE} is not writable here (root only)")
    busy = dataclasses.replace(settings, cpu_latency="busy", cpu_latency_linger_s=2.0,
                               heartbeat_interval_s=0.05)
    real = kernel
    before = device_value() if real else None
    if not real:
        (tmp_path / "dma").write_bytes(b"")
    beats = []

    def on(client, *handler):
        if not real:
            client.cpu.device = str(tmp_path / "dma")
        if handler:
            client.on(*handler[:2], **handler[2])
    replier = bus_clients("memory", settings=busy, heartbeat=True, setup=lambda c: on(
        c, "MemoryQuery", lambda e, m: MemoryResult(op=m.op, stats={"n": m.n}),
        {"request": True}))
    asker = bus_clients("planner", settings=busy, setup=lambda c: on(
        c, "Heartbeat", lambda e, m: beats.append(m), {"task": "memory"}))
    wait_until(lambda: len(beats) >= 3, 10, "three heartbeats of the replier")
    assert asker.stats()["cpu_latency"] == "idle" and replier.stats()["cpu_latency"] == "idle"
    _, reply = asker.request(MemoryQuery(op="stats", n=7), to="memory")
    assert reply.stats["n"] == 7
    wait_until(lambda: replier.stats()["cpu_latency"] == "held", 5, "the replier's request")
    assert asker.stats()["cpu_latency"] == "held"
    if before is not None:      # the kernel's own view, where this test may read it (root)
        assert device_value() == 0
    wait_until(lambda: asker.stats()["cpu_latency"] == "idle"
               and replier.stats()["cpu_latency"] == "idle", 10, "both requests dropped")
    assert asker.cpu.holds == 1 and replier.cpu.holds == 1
    if before is not None and before == NO_REQUEST:
        assert device_value() == NO_REQUEST


def test_a_stopped_client_drops_its_request(bus_process, bus_clients, settings, tmp_path):
    busy = dataclasses.replace(settings, cpu_latency="busy", cpu_latency_linger_s=60.0)
    device = tmp_path / "dma"    # a stand-in: the held request outlives the other test's check
    device.write_bytes(b"")

    def on_device(client):
        client.cpu.device = str(device)
        client.on("MemoryQuery", lambda e, m: MemoryResult(op=m.op), request=True)
    replier = bus_clients("memory", settings=busy, setup=on_device)
    asker = bus_clients("planner", settings=busy, setup=on_device)
    asker.request(MemoryQuery(op="stats"), to="memory")
    assert asker.cpu.held
    asker.stop()
    assert asker.wait_stopped(10) and not asker.cpu.held
    replier.stop()
    assert replier.wait_stopped(10) and not replier.cpu.held


def test_up_refuses_a_bad_value_and_status_says_what_holds(settings, tmp_path):
    from services.runtime import daemon
    with pytest.raises(daemon.DaemonError, match="ARTOO_CPU_LATENCY"):
        daemon.up(dataclasses.replace(settings, cpu_latency="always"), timeout_s=5)
    assert daemon.supervisord_pid(settings) is None       # refused before anything started
    assert describe("off").startswith("off")
    assert describe("busy", str(tmp_path / "none")).startswith("busy, unavailable")
    (tmp_path / "dma").write_bytes(b"")
    assert describe("busy", str(tmp_path / "dma")).startswith("busy — idle CPUs kept polling")
    assert daemon.unreachable_report(settings)["cpu_latency"] == describe(settings.cpu_latency)
