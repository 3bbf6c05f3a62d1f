"""One executor attempt per goal, on the bundled model, checked by the goal's checker (dev half).

A fast loop for work on the executor's prompt and protocol: no daemon, no validator, no retries —
the real `Executor` class with the real tools (sandbox, Law 1 gate) and the GGUF loaded in this
process with llama.cpp at temperature 0. About 20-40 s per goal on 2 cores. Its pass count is the
executor's first-attempt skill, not artoo's result (run.py measures that). Dev goals only.

    .venv/bin/python benchmarks/agent/executor_only.py [GOAL_ID ...]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from protocol.messages import SubTask  # noqa: E402
from protocol.settings import Settings, load_settings  # noqa: E402
from services.roles.executor import Executor  # noqa: E402
from services.runtime.local_model import model_path  # noqa: E402
from services.safety import law1  # noqa: E402
from services.safety.tools import Toolbox  # noqa: E402

GOALS = Path(__file__).resolve().parent / "goals" / "dev"


class InProcessModel:
    """The executor's plain-text LLM interface over llama.cpp in this process."""
    local = True

    def __init__(self, path: Path):
        from llama_cpp import Llama
        self.model = Llama(model_path=str(path), n_ctx=4096, n_threads=2, verbose=False)
        self.calls = 0

    def complete_text(self, system, prompt, task_id=None, max_tokens=200, temperature=None):
        self.calls += 1
        reply = self.model.create_chat_completion(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            temperature=temperature or 0, max_tokens=max_tokens)
        return reply["choices"][0]["message"]["content"]


def prepare(gid: str, prefix: str) -> tuple[Path, str, Path, Settings, SubTask]:
    """A goal's fresh workspace (its setup script run): goal dir, goal, temporary root (the
    workspace is root/ws), settings and the one subtask."""
    goal_dir = GOALS / gid
    goal = json.loads((goal_dir / "goal.json").read_text())["goal"]
    root = Path(tempfile.mkdtemp(prefix=prefix))
    ws = root / "ws"
    ws.mkdir()
    subprocess.run(["bash", str(goal_dir / "setup.sh")], cwd=ws, check=True, timeout=60)
    settings = Settings(home=root / "home", workspace=str(ws))
    return goal_dir, goal, root, settings, SubTask(subtask_id="st1", parent_task_id="bench",
                                                   intent=goal, goal=goal)


def judge(goal_dir: Path, ws: Path, answer: str, status: str) -> subprocess.CompletedProcess:
    """The goal's checker on (answer, status) over the workspace `ws`."""
    with tempfile.TemporaryDirectory(prefix="artoo-judge-") as tmp:
        out = Path(tmp) / "result.json"
        out.write_text(json.dumps({"answer": answer, "status": status}))
        return subprocess.run([sys.executable, str(goal_dir / "check.py"), str(ws), str(out)],
                              capture_output=True, text=True, timeout=60)


def run_goal(gid: str, llm: InProcessModel) -> bool:
    goal_dir, goal, root, settings, subtask = prepare(gid, "artoo-exe-")
    toolbox = Toolbox(settings, approve=lambda **_: law1.Decision(True, "bench", "approved"))
    llm.calls, started = 0, time.monotonic()
    result = Executor(subtask, llm, toolbox, settings).run_attempt(1)
    status = "not_possible" if result.status == "not_possible" else "unverified"
    check = judge(goal_dir, root / "ws", str(result.output), status)
    ok = check.returncode == 0
    print(f"{gid:26} {'PASS' if ok else 'FAIL'}  calls {llm.calls}  "
          f"{time.monotonic() - started:5.1f}s  {check.stdout.strip()[:110]}", flush=True)
    return ok


def load(argv: list[str]) -> tuple[Optional[InProcessModel], list[str]]:
    """The bundled model in this process (None, with a message, when it is not installed) and
    the goal ids: those named, else every dev goal."""
    path = model_path(load_settings())
    if path is None:
        print("no local model: run `bash scripts/install-local-model` first", file=sys.stderr)
        return None, []
    return InProcessModel(path), argv or sorted(
        p.name for p in GOALS.iterdir() if (p / "goal.json").exists())


def main(argv: list[str]) -> int:
    llm, ids = load(argv)
    if llm is None:
        return 2
    passed = sum(run_goal(gid, llm) for gid in ids)
    print(f"executor only, one attempt: {passed}/{len(ids)} dev goals")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
