"""The web console's JSON API over real HTTP, against the real daemon with a scripted two-round run:
the token guard, tasks, one task (timeline, GGS points, attempts, messages), daemon, audit, memory,
the live event stream, the read-only guarantee and the `artoo web` command itself."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from audit_support import logged_envelopes, wait_until
from conftest import REPO
from protocol import accel
from protocol.bus import BusClient
from protocol.routes import WORK_TYPES
from services.runtime import tasklog
from web_harness import web_daemon

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def web():
    with web_daemon() as env:
        yield env


def get(console, path: str, *, token: str | None = "", cookie: str = "", method: str = "GET",
        timeout: float = 20.0):
    """(status, headers, body) of one request; token "" = the console's own, None = none."""
    url = f"http://127.0.0.1:{console.port}{path}"
    if token is not None:
        url += ("&" if "?" in path else "?") + f"token={token or console.token}"
    req = urllib.request.Request(url, method=method)
    if cookie:
        req.add_header("Cookie", cookie)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def get_json(console, path: str):
    status, _headers, body = get(console, path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


def test_every_request_needs_the_token(web):
    c = web.console
    for path in ("/", "/api/tasks", f"/api/tasks/{web.rid}", "/api/daemon", "/events",
                 "/static/app.js"):
        assert get(c, path, token=None)[0] == 403, path
        assert get(c, path, token="wrong-" + c.token)[0] == 403, path
    status, headers, body = get(c, "/")
    assert status == 200 and b"<script src=\"/static/app.js\">" in body
    cookie = headers["Set-Cookie"]
    assert f"artoo_console={c.token}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    # the cookie alone is enough afterwards, as in Jupyter
    assert get(c, "/api/tasks", token=None, cookie=f"artoo_console={c.token}")[0] == 200
    assert get(c, "/static/app.js", token=None, cookie=f"artoo_console={c.token}")[0] == 200
    assert get(c, "/api/tasks", token=None, cookie="artoo_console=nope")[0] == 403
    # read-only: no method but GET/HEAD
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert get(c, "/api/tasks", method=method)[0] == 405
    assert c.httpd.server_address[0] == "127.0.0.1"


def test_tasks_lists_the_run_with_its_lifecycle(web):
    rows = get_json(web.console, "/api/tasks")
    row = next(r for r in rows if r["id"] == web.rid)
    assert row["lifecycle"] == "completed" and row["state"] == "finished"
    assert row["goal"] == "name the largest file" and "workspace" in row
    assert row["cost"]["total"]["calls"] >= 5 and row["age_s"] >= 0
    assert [r["id"] for r in get_json(web.console, f"/api/tasks?q={web.rid}")] == [web.rid]
    assert web.rid not in [r["id"] for r in get_json(web.console, "/api/tasks?state=failed")]
    assert [r["id"] for r in get_json(web.console, "/api/tasks?state=completed&q=" + web.rid)] \
        == [web.rid]
    assert get(web.console, "/api/tasks/run-does-not-exist")[0] == 404


def test_task_has_timeline_attempts_result_and_one_ggs_point_per_round(web):
    d = get_json(web.console, f"/api/tasks/{web.rid}")
    decisions = [e for e in tasklog.read(web.settings.tasks_dir, web.rid)
                 if e["kind"] == "ggs_decision"]
    assert len(decisions) == 2
    points = d["ggs_points"]
    assert len(points) == len(decisions)
    assert [p["directive"] for p in points] == [e["directive"] for e in decisions]
    assert points[-1]["directive"] == "accept" and points[0]["directive"] != "accept"
    assert [p["round"] for p in points] == [0, 1]       # as the plan rounds they judge
    for p in points:
        assert all(isinstance(p[k], (int, float)) for k in ("d", "p", "omega", "l"))
    kinds = [e["kind"] for e in d["timeline"]]
    assert kinds.index("task_begin") < kinds.index("ggs_decision") < kinds.index("task_end")
    assert kinds.count("ggs_decision") == 2
    roles = {e["role"] for e in d["timeline"]}
    assert {"perceiver", "planner", "executor", "agentval", "metaval", "ggs"} <= roles
    assert "?" not in roles
    assert [e["t"] for e in d["timeline"]] == sorted(e["t"] for e in d["timeline"])
    assert len(d["plans"]) == 2 and len(d["attempts"]) >= 2
    calls = [c for a in d["attempts"] for c in a["tool_calls"]]
    assert any("largest=b.txt-2048" in c["output"] for c in calls)
    assert any(v["met"] for a in d["attempts"] for v in a["verdicts"])
    assert d["final"] and d["lifecycle"] == "completed"
    types = {m["type"] for m in d["messages"]}     # the same task from the audit log
    assert {"UserRequest", "TaskSpec", "ReplanRequest", "PlanDirective", "FinalResult"} <= types
    assert {m["from"] for m in d["messages"]} >= {"user", "perceiver", "planner", "ggs"}


def test_daemon_page_lists_every_role(web):
    d = get_json(web.console, "/api/daemon")
    assert d["proxy"]["frontend_msgs_in"] > 0 and "capture_captured" in d["proxy"]
    assert d["bus"] == "up"
    assert d["bus_hot_path"] == accel.STATE            # which path the bus runs, and why
    roles = {r["role"] for r in d["roles"] if r["alive"]}
    assert {"bus", "tap", "perceiver", "planner", "metaval", "ggs", "memory"} <= roles
    assert d["console"]["live"] is True and d["console"]["node"].startswith("web-console-")


def test_audit_search_and_chain_verify(web):
    # the tap writes behind the bus: the task's last messages reach the log a moment after it ends
    r = wait_until(lambda: (r := get_json(web.console, f"/api/audit?task={web.rid}&since=1h"))
                   and {x["type"] for x in r["records"]} >= {"TaskSpec", "FinalResult"} and r,
                   30, "the task's TaskSpec and FinalResult in the audit log")
    assert r["available"]
    assert all(web.rid == x["task"] for x in r["records"])
    r = get_json(web.console, f"/api/audit?task={web.rid}&type=FinalResult&role=ggs")
    assert [x["type"] for x in r["records"]] == ["FinalResult"]
    assert get(web.console, "/api/audit?since=yesterday-ish")[0] == 400
    v = get_json(web.console, "/api/audit/verify")
    assert v["available"] and v["ok"] is True and v["records"] > 0


def test_memory_tags_from_the_memory_process(web):
    # an operator rule, written by the CLI (the console itself writes nothing)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-m", "services.cli", "memory", "remember", "--sigma", "-1",
                    "--space", "global:user", "Never write outside the workspace (web test)"],
                   cwd=REPO, env=env, check=True, capture_output=True, timeout=60)
    r = get_json(web.console, "/api/memory")
    tag = next(g for g in r["groups"] if g["space"] == "global:user")
    assert tag["levels"].get("C") == 1 and tag["action"]
    one = get_json(web.console, f"/api/memory?space={tag['space']}&entity={tag['entity']}")
    assert [m["content"] for m in one["megrams"]] == ["Never write outside the workspace (web test)"]
    shown = get_json(web.console, f"/api/memory?id={one['megrams'][0]['id'][:10]}")
    assert shown["megrams"][0]["id"] == one["megrams"][0]["id"]
    assert get(web.console, "/api/memory?id=ffffffffffffffff")[0] == 404


def test_world_page_from_the_world_process(web):
    r = get_json(web.console, "/api/world")
    assert set(r) == {"entities", "facts", "claims", "goals"}
    # the run's episode was recorded: its USER goal is not listed among proposals, its answer is
    # a fact or a claim by its status
    assert all(g["type"] != "USER" for g in r["goals"])
    assert any(c["subject"] == f"task:{web.rid}" for c in r["facts"] + r["claims"])
    shown = get_json(web.console, f"/api/world?entity=task:{web.rid}")
    assert shown["entity"]["kind"] == "task"
    assert get(web.console, "/api/world?entity=no-such-thing")[0] == 404
    status, _, page = get(web.console, "/static/app.js")
    assert status == 200 and b"showWorld" in page


def test_events_stream_the_bus_and_the_console_sends_no_work_message(web):
    c = web.console
    url = f"http://127.0.0.1:{c.port}/events?token={c.token}"
    seen = []
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e["type"] == "Heartbeat" for e in seen):
            line = resp.readline().decode()
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
    assert seen[0]["type"] == "_console" and seen[0]["state"] == "live"
    assert any(e["type"] == "Heartbeat" and e["from"] for e in seen)
    # the read-only guarantee: everything the console's node ever put on the bus, from the
    # audit log, is its readiness probe or a memory or world query (request/reply); no work message
    # a barrier: the tap logs in the proxy's order, so once a probe sent now is in the log, all
    # the console sent before it is too
    probe = BusClient("user", settings=web.settings, heartbeat=False).start(timeout=30)
    try:
        wait_until(lambda: any(e["node"] == probe.node for e in logged_envelopes(web.settings)), 30,
                   "a later client's probe in the audit log")
    finally:
        probe.stop()
    mine = [e["type"] for e in logged_envelopes(web.settings) if e["node"] == c.feed.node]
    assert mine and set(mine) <= {"Hello", "MemoryQuery", "WorldQuery"}, mine
    assert not set(mine) & WORK_TYPES
    assert c.feed.stats()["unacked"] == 0 and c.feed.client._pending == {}


def test_artoo_web_command_prints_a_token_url_and_stops_on_ctrl_c(web):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "web", "--port", "0"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        url = next(line.strip() for line in lines if "?token=" in line)
        assert url.startswith("http://127.0.0.1:")
        base, token = url.split("/?token=")
        assert len(token) >= 24
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(base + "/api/tasks", timeout=10)
        assert denied.value.code == 403
        with urllib.request.urlopen(f"{base}/api/tasks?token={token}", timeout=20) as resp:
            assert web.rid in [r["id"] for r in json.loads(resp.read())]
        assert psutil.Process(proc.pid).children(recursive=True) == []
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
        assert "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_static_assets_ship_as_package_data():
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["services.cli.webconsole"]
    static = REPO / "services" / "cli" / "webconsole" / "static"
    shipped = {p.name for g in globs for p in static.parent.glob(g)}
    assert shipped == {p.name for p in static.iterdir()} >= {"index.html", "app.js", "app.css"}
    text = "".join(p.read_text() for p in static.iterdir())
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")   # nothing remote
    assert "https://" not in text
