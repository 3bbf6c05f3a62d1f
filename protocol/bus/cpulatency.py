"""Keep idle CPUs polling while this process has bus work (`ARTOO_CPU_LATENCY=busy`).

Why: where idle CPUs halt at once — a KVM guest with the `haltpoll` idle driver and
`guest_halt_poll_ns` 0, as on the machines behind docs/BENCHMARKS.md — every bus hop wakes a
thread on a halted vCPU and pays a VM exit; a request/reply round trip has a dozen such wake-ups
(measured ≈ 330 µs p50 against ≈ 125 µs with idle CPUs polling). The kernel's PM QoS interface
lets a process ask for the second: write a wake-up latency of 0 µs to `/dev/cpu_dma_latency` and
keep the file open. The request lasts exactly as long as the open file: a process that dies takes
it with it, so nothing is left changed on the machine (unlike the haltpoll module parameter,
which stays the machine owner's setting). Polling costs the idle CPUs' time, so a process holds
the request only while it has work — from a message other than a heartbeat or a probe, sent or
received, until `linger` seconds after the last — and an idle daemon holds none.
"""
from __future__ import annotations

import logging
import os
import struct
import threading
import time
import weakref

log = logging.getLogger("artoo.bus.cpulatency")

DEVICE = "/dev/cpu_dma_latency"
MODES = ("off", "busy")
QUIET = frozenset(("Heartbeat", "Hello"))   # what an idle daemon sends: not work
_LIVE: "weakref.WeakSet[CpuLatency]" = weakref.WeakSet()


def check_mode(mode: str) -> str:
    """The setting's value, or a clear error naming it."""
    value = (mode or "off").strip().lower()
    if value not in MODES:
        raise ValueError(f"invalid value for ARTOO_CPU_LATENCY: {mode!r} (one of: "
                         f"{', '.join(MODES)})")
    return value


def describe(mode: str, device: str = DEVICE) -> str:
    """One line for `artoo up`/`status`: the setting and whether this machine honours it."""
    if check_mode(mode) == "off":
        return ("off — idle CPUs may sleep between bus hops (ARTOO_CPU_LATENCY=busy keeps them "
                "polling while there is work)")
    if not os.access(device, os.W_OK):
        return f"busy, unavailable — no write access to {device} (root); running without it"
    return f"busy — idle CPUs kept polling while a process has bus work (PM QoS, {device})"


class CpuLatency:
    """One process's PM QoS request, held while the process is busy (thread-safe)."""

    def __init__(self, mode: str = "off", linger_s: float = 2.0, device: str = DEVICE):
        self.enabled = check_mode(mode) == "busy"
        self.linger_s = max(0.0, linger_s)
        self.device = device
        self.error = ""            # why the request could not be made (then it is not retried)
        self.holds = 0             # times the request was made (one per busy period)
        self._fd: int | None = None
        self._last = 0.0
        self._lock = threading.Lock()
        _LIVE.add(self)

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def state(self) -> str:
        if not self.enabled:
            return "off"
        if self.error:
            return f"unavailable: {self.error}"
        return "held" if self._fd is not None else "idle"

    def touch(self) -> None:
        """Work was sent or received: hold the request (made now if it is not)."""
        if not self.enabled:
            return
        self._last = time.monotonic()
        if self._fd is None and not self.error:
            self._open()

    def _open(self) -> None:
        with self._lock:
            if self._fd is not None or self.error:
                return
            try:
                fd = os.open(self.device, os.O_WRONLY | os.O_CLOEXEC)
            except OSError as exc:
                self.error = f"{self.device}: {exc.strerror or exc}"
                log.warning("ARTOO_CPU_LATENCY=busy: cannot request a CPU wake-up latency (%s; "
                            "it needs write access to %s, e.g. root); running without it",
                            self.error, self.device)
                return
            try:
                os.write(fd, struct.pack("=i", 0))   # 0 µs: idle CPUs poll, never halt
            except OSError as exc:
                os.close(fd)
                self.error = f"{self.device}: {exc.strerror or exc}"
                log.warning("ARTOO_CPU_LATENCY=busy: the kernel refused the request (%s)",
                            self.error)
                return
            self._fd = fd
            self.holds += 1

    def due_ms(self, now: float) -> float | None:
        """Release the request once the process has been idle `linger` seconds; else the
        milliseconds until it may be (None: nothing held). Called by the bus loop each wake-up."""
        if self._fd is None:
            return None
        left = self._last + self.linger_s - now
        if left > 0:
            return left * 1000.0
        self.close()
        return None

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)       # the kernel drops the request with the file

    def _forget_in_child(self) -> None:
        # A forked child shares the parent's open file; closing its copy leaves the parent's
        # request in place, and the child makes its own when it is busy.
        fd, self._fd = self._fd, None
        self._lock = threading.Lock()
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _after_fork_in_child() -> None:
    for hold in list(_LIVE):
        hold._forget_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
