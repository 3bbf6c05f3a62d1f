"""Bus throughput and latency across hosts (issue 18): two network namespaces joined by a veth
pair, the proxy on the "main" one serving worker hosts on tcp with CURVE (`ARTOO_BUS_LISTEN`),
publisher and subscriber on the "worker" one (`ARTOO_BUS_JOIN`), so every message crosses the
link twice, encrypted. The baseline, measured in the same run against the same proxy: the same
publisher and subscriber on the main host over ipc. Signing is on in both, as deployed.

Run as root: `.venv/bin/python benchmarks/bench_multihost.py [--messages 20000] [--json]`.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_bus import bench_latency, bench_throughput, stop_all, wait_ready  # noqa: E402
from protocol import curve, signing  # noqa: E402
from protocol.settings import load_settings  # noqa: E402


def measure(env: dict, messages: int, rate: int, seconds: float) -> dict:
    os.environ.update(env)
    settings = load_settings()
    ctx_mp = mp.get_context("spawn")
    return {"throughput": bench_throughput(messages, env, settings, ctx_mp),
            "latency": bench_latency(rate, seconds, env, settings, ctx_mp)}


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker-side", help=argparse.SUPPRESS)   # JSON env: run inside the ns
    args = parser.parse_args()
    if args.worker_side:
        print(json.dumps(measure(json.loads(args.worker_side), args.messages, args.rate,
                                 args.seconds)))
        return 0

    tag = secrets.token_hex(2)
    main_ns, worker_ns = f"abm-{tag}", f"abw-{tag}"
    main_ip, worker_ip = "10.213.7.1", "10.213.7.2"
    root = Path(tempfile.mkdtemp(prefix="ab-mh-", dir="/tmp"))
    procs: list = []
    try:
        for ns in (main_ns, worker_ns):
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", f"abm{tag}", "type", "veth", "peer", "name", f"abw{tag}")
        ip("link", "set", f"abm{tag}", "netns", main_ns)
        ip("link", "set", f"abw{tag}", "netns", worker_ns)
        ip("-n", main_ns, "addr", "add", f"{main_ip}/30", "dev", f"abm{tag}")
        ip("-n", worker_ns, "addr", "add", f"{worker_ip}/30", "dev", f"abw{tag}")
        ip("-n", main_ns, "link", "set", f"abm{tag}", "up")
        ip("-n", worker_ns, "link", "set", f"abw{tag}", "up")

        hwm = str(max(100_000, args.messages + 1000))
        main_env = {"ARTOO_HOME": str(root / "main"), "ARTOO_WORKSPACE": str(root / "ws"),
                    "ARTOO_CAPTURE": "0", "ARTOO_HWM": hwm,
                    "ARTOO_BUS_LISTEN": f"{main_ip}:5550"}
        worker_env = {"ARTOO_HOME": str(root / "worker"), "ARTOO_WORKSPACE": str(root / "ws"),
                      "ARTOO_CAPTURE": "0", "ARTOO_HWM": hwm,
                      "ARTOO_BUS_JOIN": f"{main_ip}:5550"}
        os.environ.update(main_env)
        main = load_settings()
        main.ensure_dirs()
        invitation = root / "invite.json"
        curve.write_invitation(main, invitation, signing.ensure_key(main))
        os.environ.update(worker_env)
        os.environ.pop("ARTOO_BUS_LISTEN")
        worker = load_settings()
        worker.ensure_dirs()
        public, bus_key = curve.accept_invitation(worker, invitation)
        signing.install_key(worker, bus_key)
        curve.allow(main, "worker", public)
        for key in worker_env:
            os.environ.pop(key, None)
        os.environ.update(main_env)

        # the proxy runs in the main namespace; this process reaches its ipc sockets from outside
        procs = [subprocess.Popen(["ip", "netns", "exec", main_ns, sys.executable, "-m",
                                   "services.runtime.bus"], cwd=REPO,
                                  env={**os.environ, **main_env}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)]
        wait_ready(main)
        local = measure(main_env, args.messages, args.rate, args.seconds)
        remote_raw = subprocess.run(
            ["ip", "netns", "exec", worker_ns, sys.executable, __file__, "--messages",
             str(args.messages), "--rate", str(args.rate), "--seconds", str(args.seconds),
             "--worker-side", json.dumps(worker_env)], cwd=REPO, capture_output=True, text=True,
            timeout=600)
        if remote_raw.returncode != 0:
            raise RuntimeError(remote_raw.stderr[-2000:])
        remote = json.loads(remote_raw.stdout.strip().splitlines()[-1])
    finally:
        stop_all(procs)
        for ns in (main_ns, worker_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)

    out = {"ipc_same_host": local, "tcp_curve_across_veth": remote,
           "throughput_ratio": remote["throughput"]["rate"] / local["throughput"]["rate"]}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for name, res in (("ipc, same host", local), ("tcp+CURVE across veth", remote)):
        t, lat = res["throughput"], res["latency"]
        print(f"{name:24} {t['rate']:9.0f} msg/s  (received {t['received']}, gaps {t['gaps']}, "
              f"rejected {t['rejected']})  latency at {args.rate}/s: p50 {lat['p50_us']:.0f} µs, "
              f"p99 {lat['p99_us']:.0f} µs, max {lat['max_us']:.0f} µs")
    print(f"throughput across the link with CURVE = {out['throughput_ratio']:.2f}× same-host ipc")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
