"""Three real goals end to end against the bundled local model (opt-in: bash scripts/test-realmodel).

A real daemon (`artoo up`, every role plus the llama.cpp server) on a temp home and workspace runs
each goal through the real CLI (`artoo run --yes --json`), and the assertions look at what the
goal produced: the file and its content, the count of a generated tree, the value read out of a
file. Nothing is scripted; the model is the one `bash scripts/install-local-model` installed (or
ARTOO_LOCAL_MODEL). Each goal's wall time and per-role LLM latency are printed (run with -s) and
appended to $ARTOO_REALMODEL_TIMINGS when set.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from protocol.settings import load_settings
from services.runtime import tasklog

pytestmark = pytest.mark.realmodel


def _installed_model() -> str:
    """The GGUF of the caller's real environment, resolved before artoo_env swaps the home."""
    if os.environ.get("ARTOO_LOCAL_MODEL"):
        return os.environ["ARTOO_LOCAL_MODEL"]
    try:
        from services.runtime.local_model import model_path
        return str(model_path(load_settings()))
    except Exception:
        return ""


MODEL = _installed_model()
GOAL_TIMEOUT_S = 900


@pytest.fixture(scope="module", autouse=True)
def _model_present():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pytest.skip("llama-cpp-python not installed: run bash scripts/install-local-model")
    if not MODEL or not Path(MODEL).is_file():
        pytest.skip(f"no local model at {MODEL!r}: run bash scripts/install-local-model")


@pytest.fixture
def real_daemon(artoo_env, monkeypatch):
    """`artoo up` with the local model on a temp home; `artoo down` leaves no process."""
    monkeypatch.setenv("ARTOO_LOCAL_MODEL", MODEL)
    from services.runtime import daemon as d
    settings = load_settings()
    settings.ensure_dirs()
    started = time.monotonic()
    d.up(settings, timeout_s=300)
    _record("daemon_up", {"wall_s": round(time.monotonic() - started, 1)})
    try:
        yield settings
    finally:
        d.down(settings)
        left = d.our_processes(settings)
        assert not left, f"processes left after down: {[p.pid for p in left]}"


def run_goal(settings, goal: str) -> tuple[dict, float]:
    """`artoo run --yes --json GOAL` as the operator would type it; (FinalResult, wall seconds)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--yes", "--json", goal],
                          capture_output=True, text=True, timeout=GOAL_TIMEOUT_S,
                          env=dict(os.environ))
    wall = time.monotonic() - started
    assert proc.stdout.strip(), f"no FinalResult (exit {proc.returncode}): {proc.stderr[-2000:]}"
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    _report(settings, goal, final, wall)
    return final, wall


def _report(settings, goal: str, final: dict, wall: float) -> None:
    per_role: dict[str, list[float]] = {}
    for event in tasklog.read(settings.tasks_dir, final["task_id"]):
        if event.get("kind") == "llm_call" and event.get("ok"):
            per_role.setdefault(event["role"], []).append(event["latency_ms"])
    figures = {"goal": goal, "directive": final["directive"], "wall_s": round(wall, 1),
               "replans": final.get("replans", 0),
               "llm": {r: {"calls": len(v), "mean_ms": round(sum(v) / len(v)),
                           "max_ms": round(max(v))} for r, v in per_role.items()}}
    _record("goal", figures)


def _record(kind: str, figures: dict) -> None:
    line = json.dumps({"kind": kind, **figures}, ensure_ascii=False)
    print(line)
    if os.environ.get("ARTOO_REALMODEL_TIMINGS"):
        with open(os.environ["ARTOO_REALMODEL_TIMINGS"], "a") as fh:
            fh.write(line + "\n")


def _text(final: dict) -> str:
    return json.dumps(final.get("output"), ensure_ascii=False) + "\n" + final.get("summary", "")


def test_three_real_goals(real_daemon):
    """One daemon, three goals in a row (the prompt cache carries over, as for an operator)."""
    settings = real_daemon
    ws = Path(settings.workspace)

    # 1. creating a file
    final, _ = run_goal(settings, "Create a file named hello.txt in the workspace containing "
                                  "the text: artoo was here")
    assert final["directive"] in ("accept", "success"), final
    assert (ws / "hello.txt").is_file()
    assert "artoo was here" in (ws / "hello.txt").read_text()

    # 2. counting the files of one type in a generated tree
    rng = random.Random(8)
    tree = ws / "tree"
    count = 0
    for i, sub in enumerate(("a", "a/b", "c", "c/d/e")):
        (tree / sub).mkdir(parents=True, exist_ok=True)
        for j in range(rng.randint(1, 3)):
            (tree / sub / f"m{i}{j}.py").write_text("pass\n")
            count += 1
        (tree / sub / f"notes{i}.md").write_text("# notes\n")
    (tree / "a" / "data.json").write_text("{}\n")
    final, _ = run_goal(settings, "How many .py files are there in the directory tree/ of the "
                                  "workspace, including subdirectories?")
    assert final["directive"] in ("accept", "success"), final
    assert str(count) in _text(final), (count, final)

    # 3. reading a value out of a file
    secret = f"{rng.randint(10000, 99999)}"
    (ws / "service.ini").write_text(f"[server]\nhost = 127.0.0.1\nport = {secret}\n"
                                    f"workers = 4\n")
    final, _ = run_goal(settings, "What is the port number in the file service.ini in the "
                                  "workspace?")
    assert final["directive"] in ("accept", "success"), final
    assert secret in _text(final), (secret, final)
