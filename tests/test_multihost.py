"""Two hosts on one bus (issue 18), proven in network namespaces on this machine.

A main host (bus with `--listen`, every role, one effector slot, instance 0 of each partitioned
role) runs in one namespace and a worker host (`--join`, a spawner and instance 1 of each
partitioned role) in another, joined by a veth pair; their keys are exchanged with
`artoo keys invite/accept/allow`. Goals run on a scripted LLM served inside the main namespace.
Effectors of some tasks run on the worker, and one task runs on the worker's roles; then the link
is cut (`ip link set down`) and the worker's processes are killed: every task still ends exactly
once — subtasks re-offered to the main host's spawner, the task whose state was on the worker
ended honestly by the main host's instances, new tasks served by them — and the auditor reports
the worker host missing. A third host with a key the
main host never allowed is refused, and the refusal is counted.

Skips, saying why, where network namespaces cannot be made (not root, no `ip`, no netns support).
"""
from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from audit_support import wait_until
from pipeline_harness import Recorder
from protocol.bus import BusClient
from protocol.envelope import owner
from protocol.settings import load_settings
from replies_effector import all_met, result, shell
from replies_pipeline import accept, perception, plan, subtask
from scripted_llm import ScriptedLLM
from services.runtime import daemon, tasklog

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 120.0


def _netns_problem() -> str:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not shutil.which("ip"):
        return "no `ip` command (iproute2)"
    probe = f"artoo-probe-{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


pytestmark = pytest.mark.skipif(bool(_netns_problem()), reason=_netns_problem() or "ok")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Host:
    """One artoo host: its data dir, its namespace, and the artoo CLI run inside it."""

    def __init__(self, root: Path, name: str, netns: str, env: dict[str, str]):
        self.name, self.netns = name, netns
        self.home = root / name
        self.home.mkdir()
        self.env = {**os.environ, "ARTOO_HOME": str(self.home), **env}
        self.env.pop("ARTOO_RUN_DIR", None)

    def artoo(self, *args: str, check: bool = True, timeout: float = 150) -> str:
        cmd = ["ip", "netns", "exec", self.netns, sys.executable, "-m", "services.cli", *args]
        proc = subprocess.run(cmd, env=self.env, cwd=REPO, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: artoo {' '.join(args)} -> {proc.returncode}\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc.stdout + proc.stderr

    def settings(self):
        return load_settings(home=self.home, workspace=Path(self.env["ARTOO_WORKSPACE"]),
                             run_dir_override="")

    def down(self) -> None:
        settings = self.settings()
        daemon.down(settings)
        left = daemon.our_processes(settings)
        assert not left, f"{self.name}: processes left after down: {[p.pid for p in left]}"


@pytest.fixture
def cluster():
    tag = secrets.token_hex(2)
    main_ns, worker_ns = f"artoo-m-{tag}", f"artoo-w-{tag}"
    net = f"10.{secrets.randbelow(200) + 20}.{secrets.randbelow(250)}"
    main_ip, worker_ip = f"{net}.1", f"{net}.2"
    veth_main, veth_worker = f"avm{tag}", f"avw{tag}"
    root = Path(tempfile.mkdtemp(prefix="at-mh-", dir="/tmp"))
    hosts: list[Host] = []
    holds: dict[str, threading.Event] = {}
    try:
        for ns in (main_ns, worker_ns):
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", veth_main, "type", "veth", "peer", "name", veth_worker)
        ip("link", "set", veth_main, "netns", main_ns)
        ip("link", "set", veth_worker, "netns", worker_ns)
        ip("-n", main_ns, "addr", "add", f"{main_ip}/30", "dev", veth_main)
        ip("-n", worker_ns, "addr", "add", f"{worker_ip}/30", "dev", veth_worker)
        ip("-n", main_ns, "link", "set", veth_main, "up")
        ip("-n", worker_ns, "link", "set", veth_worker, "up")

        def rid_of(req) -> str:
            """The run a request is for (its task header; memory may quote other runs)."""
            return req.task if req.task in holds else next(
                (rid for rid in reversed(list(holds)) if rid in req.user), "x")

        def executor(req):
            rid = rid_of(req)
            if "Tool calls so far" in req.user:
                return result("done")
            if rid in holds:
                holds[rid].wait(DEADLINE_S)   # every effector is busy until the test lets go
            return shell(f"printf 'A\\n' >> out-{rid}.txt")

        llm = ScriptedLLM(host=main_ip, netns=main_ns)
        llm.on("perceiver", lambda req: perception(f"append A {rid_of(req)}"))
        llm.on("planner", lambda req: plan(subtask(f"append a line A to out-{rid_of(req)}.txt",
                                                   ["a line appended"])))
        llm.on("executor", executor)
        llm.on("agentval", lambda req: all_met("a line appended", evidence="printf appended A"))
        llm.on("verifier", lambda req: "FILE: none\nCOMMAND: none")
        llm.on("metaval", lambda req: accept("appended", merged_output="appended"))
        llm.start()
        ws = root / "ws"
        ws.mkdir()
        common = {**llm.env(), "ARTOO_WORKSPACE": str(ws), "ARTOO_SCALE": "1",
                  "ARTOO_LLM_BACKOFF_S": "0.01", "ARTOO_LLM_RETRIES": "0"}
        port = 20000 + secrets.randbelow(30000)
        main = Host(root, "main", main_ns, {**common, "ARTOO_MAX_CONCURRENT_EFFECTORS": "1",
                                            "ARTOO_MISSING_AFTER_S": "2"})
        worker = Host(root, "worker", worker_ns, common)
        intruder = Host(root, "intruder", worker_ns, common)
        hosts += [main, worker, intruder]
        yield {"main": main, "worker": worker, "intruder": intruder, "llm": llm, "holds": holds,
               "join": f"{main_ip}:{port}", "ws": ws, "worker_ns": worker_ns,
               "veth_worker": veth_worker}
    finally:
        for ev in holds.values():
            ev.set()
        for host in hosts:
            try:
                host.down()
            except Exception as exc:  # noqa: BLE001 - the other hosts must still go down
                print(f"down of {host.name} failed: {exc}")
        if "llm" in locals():
            llm.stop()
        for ns in (main_ns, worker_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def exchange_keys(cluster) -> Path:
    """Invite on the main host, accept on the worker, allow its key on the main host."""
    main, worker = cluster["main"], cluster["worker"]
    invitation = main.home / "invite.json"
    main.artoo("keys", "invite", "--out", str(invitation))
    assert oct(invitation.stat().st_mode & 0o777) == "0o600"
    accepted = worker.artoo("keys", "accept", str(invitation))
    worker_key = accepted.split("public key: ")[1].split()[0]
    main.artoo("keys", "allow", "worker", worker_key)
    return invitation


PARTITIONED = ("perceiver", "planner", "metaval", "ggs")


def test_a_worker_host_runs_effectors_and_partitioned_roles_and_its_loss_fails_over(cluster):
    """Instance 0 of each partitioned role on the main host, instance 1 on the worker
    (`--instances 0/2` and `1/2`), effectors on both. Goals hashed to instance 0 have their
    effectors on the worker; one goal hashed to instance 1 runs on the worker's roles. The worker is
    cut off and killed: the first goals' subtasks are re-offered to the main host and complete;
    the goal whose roles were on the worker ends honestly (its state was there) long before its
    deadline; goals hashed to instance 1 afterwards complete on the main host; each goal has
    exactly one FinalResult."""
    main, worker, intruder = cluster["main"], cluster["worker"], cluster["intruder"]
    join = cluster["join"]
    for host in (main, worker):   # re-sends at most 1 s apart: failover in seconds, not tens
        host.env.update(ARTOO_ACK_MAX_BACKOFF_S="1", ARTOO_MISSING_AFTER_S="2")

    invitation = exchange_keys(cluster)
    intruder.artoo("keys", "accept", str(invitation))   # the secret leaked, but never allowed

    main.artoo("up", "--listen", join, "--host-name", "main", "--instances", "0/2")
    out = worker.artoo("up", "--join", join, "--roles", "spawner," + ",".join(PARTITIONED),
                       "--instances", "1/2", "--host-name", "worker", "--json")
    status = json.loads(out[out.index("{"):out.rindex("}") + 1])
    assert status["host"] == "worker" and "joined" in status["bus"]
    alive = [(r["role"], r["instance"]) for r in status["roles"] if r["alive"]]
    assert alive.count(("spawner", 0)) == 1 and set(alive) >= {(r, 1) for r in PARTITIONED}

    # a host whose key was never allowed is refused, and counted by the main host's proxy
    intruder.env.update(ARTOO_BUS_JOIN=join, ARTOO_ROLES="spawner", ARTOO_HOST_NAME="intruder")
    refused = intruder.artoo("status", "--json", check=False)
    assert json.loads(refused[refused.index("{"):refused.rindex("}") + 1])["bus"] == \
        "unreachable", refused

    settings = main.settings()
    from rich.console import Console
    from services.cli.run import RunSession
    session = RunSession(settings, Console(file=io.StringIO(), width=160), interactive=False)
    rec = Recorder()
    watcher = BusClient("user", settings=settings, heartbeat=False)
    watcher.on("*", rec)
    watcher.start()
    try:
        from services.runtime.bus import query_control
        curve_stats = wait_until(
            lambda: (lambda c: c if c["refused"] >= 1 else None)(
                query_control(settings)["stats"]["curve"]), 20, "the refused handshake counted")
        assert curve_stats["authorized"] == ["client", "worker"]

        def host_of(node: str) -> str:
            for env, m in rec.items:
                if env.type == "Heartbeat" and m.node == node:
                    return m.host
            return ""

        def planners_hosts(tasks: list[str]) -> dict:
            def known():
                hosts = {e.task: host_of(e.node) for e in rec.envs("DispatchManifest")
                         if e.task in tasks}
                return hosts if len(hosts) == len(tasks) and all(hosts.values()) else None
            return rec.wait_for(known, 15, "the hosts of the tasks' planners")

        def rid_for(instance: int, tag: str) -> str:
            while True:
                rid = f"run-mh-{tag}-{secrets.token_hex(3)}"
                if owner(rid, 2) == instance:
                    return rid

        # every main-host instance counts the worker's instance 1 alive before goals go out
        def main_sees_worker() -> bool:
            latest = {}
            for env, m in rec.items:
                if env.type == "Heartbeat" and m.role in PARTITIONED and m.host == "main":
                    latest[m.role] = m.info.get("alive")
            return len(latest) == len(PARTITIONED) and all(a == [0, 1] for a in latest.values())
        rec.wait_for(main_sees_worker, 30, "the main host's instances hearing instance 1")

        rids = [rid_for(0, str(i)) for i in range(3)]
        held = rid_for(1, "held")
        for rid in rids + [held]:
            cluster["holds"][rid] = threading.Event()
            session.submit(f"append A {rid}", run_id=rid, deadline_s=DEADLINE_S * 5)
        started = rec.wait_for(lambda: (lambda ms: ms if len({m.task_id for m in ms}) == 4
                                        else None)(rec.of("EffectorStarted")), 60,
                               "an effector for each task")
        hosts_of = rec.wait_for(lambda: (lambda h: h if all(h.values()) else None)(
            {m.task_id: host_of(m.spawner) for m in started}), 10, "the spawners' hosts")
        on_worker = [t for t, h in hosts_of.items() if h == "worker" and t in rids]
        assert len(on_worker) >= 2, hosts_of      # the main host has one effector slot
        # (a planner's host is known from its heartbeats: under load its manifest may come first)
        planned_on = planners_hosts(rids + [held])
        assert planned_on[held] == "worker", planned_on
        assert {planned_on[rid] for rid in rids} == {"main"}, planned_on
        # the worker's perceiver and planner have had everything they sent acknowledged: the
        # worker holds its goal (unacknowledged, it would simply be re-delivered to the main host)
        since = time.time()
        for role in ("perceiver", "planner"):
            rec.wait_for(lambda: any(e.type == "Heartbeat" and m.role == role and m.host == "worker"
                                     and m.unacked == 0 and e.ts > since for e, m in rec.items),
                         20, f"the worker's {role} with nothing unacknowledged")

        # the link goes down, then every process of the worker host is killed
        ip("-n", cluster["worker_ns"], "link", "set", cluster["veth_worker"], "down")
        daemon.sweep(worker.settings())
        fresh = rid_for(1, "fresh")
        cluster["holds"][fresh] = threading.Event()
        session.submit(f"append A {fresh}", run_id=fresh, deadline_s=DEADLINE_S * 5)
        for ev in cluster["holds"].values():
            ev.set()

        for rid in rids + [fresh]:
            final = session.follow(rid, DEADLINE_S)
            assert final is not None, f"{rid}: no FinalResult"
            assert final.directive in ("accept", "success"), (rid, final.summary)
            out = cluster["ws"] / f"out-{rid}.txt"
            events = [(e["kind"], e.get("tool_input") or e.get("error") or e.get("summary"))
                      for e in tasklog.read(settings.tasks_dir, rid)]
            assert out.exists() and out.read_text() == "A\n", "\n".join(
                map(str, [rid, hosts_of] + events))   # done once
        for rid in on_worker:
            kinds = [e["kind"] for e in tasklog.read(settings.tasks_dir, rid)]
            assert "subtask_reoffered" in kinds, kinds
        lost = session.follow(held, DEADLINE_S)
        assert lost is not None and lost.directive == "abandon", held
        assert "instance 1" in lost.summary and "stopped heartbeating" in lost.summary, \
            lost.summary
        for rid in rids + [fresh, held]:
            rec.wait_for(lambda: rec.envs("FinalResult", task=rid), 10, "the watcher's copy")
            finals = rec.envs("FinalResult", task=rid)
            assert len({e.id for e in finals}) == 1, rid
            assert host_of(finals[0].node) == "main"
        planned_on = planners_hosts([fresh])
        assert planned_on[fresh] == "main", planned_on

        # the auditor on the main host reports the worker host missing
        from auditor.operator import request_report
        report = wait_until(lambda: (lambda r: r if any(h["host"] == "worker" for h in
                                                        r.get("missing_hosts", [])) else None)(
            request_report(settings, timeout=3.0)), 30, "the missing host in an audit report")
        gone = next(h for h in report["missing_hosts"] if h["host"] == "worker")
        assert "spawner[0]" in gone["roles"] and "planner[1]" in gone["roles"], gone
    finally:
        watcher.stop()
        session.close()
