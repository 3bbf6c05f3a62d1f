"""CPU per message across the bus chain (issue 34): publisher process, proxy, subscriber process.

Process CPU time (user + system, every thread, ZeroMQ's I/O threads included) divided by the
messages sent at saturation, signing on. Load inflates wall time far more than CPU time, so this
compares two checkouts on a busy machine where `bench_bus.py`'s rates swing. Measures the
checkout it is run from (run a baseline checkout's copy from that checkout's directory).
Run: `.venv/bin/python benchmarks/bench_bus_cpu.py [messages=30000] [runs=1]`.
"""
import json, os, sys, shutil, tempfile, threading, multiprocessing as mp
from pathlib import Path
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(HERE, "benchmarks"))
import bench_bus as b
from protocol.bus import BusClient
from protocol.settings import load_settings

def sub_main(env, n, ready, results):
    os.environ.update(env)
    s = load_settings(); done = threading.Event(); st = {"n": 0}
    def handle(_e, m):
        st["n"] += 1
        if st["n"] >= n: done.set()
    c = BusClient("metaval", settings=s, heartbeat=False); c.on("LlmUsage", handle); c.start(); ready.set()
    t0 = os.times(); done.wait(600); t1 = os.times()
    results.put({"n": st["n"], "cpu": (t1.user - t0.user) + (t1.system - t0.system)}); c.stop()

def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    root = Path(tempfile.mkdtemp(prefix="ab-", dir="/tmp"))
    env = {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"), "ARTOO_CAPTURE": "0", "ARTOO_HWM": str(n + 1000)}
    os.environ.update(env); s = load_settings(); s.ensure_dirs()
    ctx = mp.get_context("spawn"); procs = b.start_bus(env, s); proxy = procs[0].pid
    out = []
    try:
        for _ in range(reps):
            ready, results = ctx.Event(), ctx.Queue()
            p = ctx.Process(target=sub_main, args=(env, n, ready, results)); p.start(); ready.wait(60)
            pub = BusClient("planner", settings=s, heartbeat=False).start(); pub.handshake()
            x0 = proc_cpu(proxy); t0 = os.times()
            for i in range(n): pub.publish(b.sample(i), task="t-bench")
            res = results.get(timeout=600); t1 = os.times(); x1 = proc_cpu(proxy)
            p.join(10); pub.stop()
            out.append({"pub_us": round(((t1.user - t0.user) + (t1.system - t0.system)) / n * 1e6, 2),
                        "sub_us": round(res["cpu"] / n * 1e6, 2), "proxy_us": round((x1 - x0) / n * 1e6, 2), "received": res["n"]})
    finally:
        b.stop_all(procs); shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"repo": HERE, "runs": out, "load": os.getloadavg()}))
if __name__ == "__main__": main()
