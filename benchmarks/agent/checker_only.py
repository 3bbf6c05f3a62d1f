"""How often Law 0 confirms a right result and rejects a wrong one (dev half), the checker alone.

For each dev goal, on a fresh workspace each time: the goal's reference solution stands in for
the executor (its answer, and the files it wrote; the tool record shows the answer, so only the
checks decide), then R4a's code-only judgement with the real checker (the bundled model in this
process, temperature 0, the real sandbox): **confirmed** when the outcome is `verified` (or
`not_possible` for an impossible goal). Then a wrong result: a question answered with the
checker's first distractor, a file goal's output with one wrong extra line, an impossible goal
answered with a near match's value: **rejected** unless it comes out `verified`. One attempt each
(no retry). Dev goals only; no daemon.

    .venv/bin/python benchmarks/agent/checker_only.py [GOAL_ID ...]
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))

from executor_only import load, prepare  # noqa: E402
from protocol.messages import ExecutionResult, Referent, ToolCallRecord  # noqa: E402
from services.roles.agentval import AgentValidator  # noqa: E402
from services.roles.verifier import Verifier  # noqa: E402
from services.safety import referents  # noqa: E402


def spec_of(goal_dir: Path):
    spec = importlib.util.spec_from_file_location(f"chk_{goal_dir.name}".replace("-", "_"),
                                                  goal_dir / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SPEC


def reference(goal_dir: Path, ws: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="artoo-ref-") as tmp:
        out = Path(tmp) / "r.json"
        subprocess.run(["bash", str(goal_dir / "reference.sh"), str(out)], cwd=ws, check=True,
                       timeout=60, capture_output=True)
        return json.loads(out.read_text())


def wrong(goal_dir: Path, ws: Path, kind: str, ref: dict) -> tuple[str, str] | None:
    """A wrong result of the goal's own failure shape: (answer, executor status), files changed
    in `ws` as needed; None when the checker names no wrong value to use."""
    spec = spec_of(goal_dir)
    if kind == "impossible":
        near = [v for v in getattr(spec, "near", [])]
        return (str(near[0]), "completed") if near else None
    outputs = getattr(spec, "outputs", None)
    if outputs:
        path = ws / next(iter(outputs))
        path.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text() if path.exists() else ""
        path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + "extra-line\n")
        return ref["answer"], "completed"
    distractors = getattr(spec, "distractors", [])
    return (str(distractors[0]), "completed") if distractors else None


def judge(gid: str, llm, make) -> tuple[str, int, str]:
    """(status, model calls, why unverified) of one R4a judgement of what `make(ws)` did."""
    goal_dir, goal, root, settings, subtask = prepare(gid, "artoo-l0-")
    ws = root / "ws"
    goal = goal.replace("{workspace}", str(ws))
    refs = referents.resolve(goal, str(ws))
    subtask = subtask.model_copy(update={"intent": goal, "goal": goal, "referents": [
        Referent.model_validate(r.as_dict()) for r in refs]})
    if referents.decisive(goal, refs):
        # as the effector does: a goal that reads what the workspace lacks ends not_possible
        # in code before the executor runs, so there is no result (right or wrong) to check
        shutil.rmtree(root, ignore_errors=True)
        return "not_possible", 0, "referents: " + referents.absence_report(
            referents.decisive(goal, refs))
    verifier = Verifier(subtask, llm, settings)
    verifier.start()
    made = make(goal_dir, ws)
    if made is None:
        verifier.close()
        shutil.rmtree(root, ignore_errors=True)
        return "n/a", 0, ""
    answer, status = made
    record = ToolCallRecord(tool="shell", arguments={"command": "bash solution.sh"},
                            target="bash solution.sh", output=answer)
    result = ExecutionResult(task_id="bench", subtask_id="st1", status=status, output=answer,
                             tool_calls=[record])
    llm.calls = 0
    validator = AgentValidator(subtask, llm, settings, verifier=verifier)
    j = validator.judge(result)
    out = j.outcome
    if out is None:
        state = "retry"
    elif out.not_possible:
        state = "not_possible"
    else:
        state = "verified" if out.verified else ("unverified" if out.status == "matched"
                                                 else "failed")
    why = "; ".join((out.unverified if out else []) or ([j.correction.what_was_wrong]
                                                         if j.correction else []))[:200]
    verifier.close()
    shutil.rmtree(root, ignore_errors=True)
    return state, llm.calls, why


def main(argv: list[str]) -> int:
    llm, ids = load(argv)
    if llm is None:
        return 2
    llm.local = True
    kinds = {gid: json.loads((Path(__file__).parent / "goals" / "dev" / gid / "goal.json")
                             .read_text())["kind"] for gid in ids}
    rows = []
    for gid in ids:
        kind = kinds[gid]
        t0 = time.monotonic()

        def right(goal_dir, ws):
            ref = reference(goal_dir, ws)
            return ref["answer"], "not_possible" if ref["status"] == "not_possible" else \
                "completed"

        def bad(goal_dir, ws):
            ref = reference(goal_dir, ws) if kind != "impossible" else {}
            if kind != "impossible":
                # the reference's effects stay, its answer too; the checker's wrong value instead
                pass
            return wrong(goal_dir, ws, kind, ref)

        r_state, r_calls, r_why = judge(gid, llm, right)
        w_state, w_calls, w_why = judge(gid, llm, bad)
        want = "not_possible" if kind == "impossible" else "verified"
        confirmed = r_state == want
        false_confirm = w_state == "verified" or (w_state == "not_possible" and
                                                  kind != "impossible")
        rows.append((kind, confirmed, w_state != "n/a", false_confirm, r_calls + w_calls))
        print(f"{gid:26} {kind:10} right: {r_state:12} wrong: {w_state:12} calls "
              f"{r_calls}+{w_calls}  {time.monotonic() - t0:5.1f}s  {r_why[:120]}", flush=True)
    right_n = len(rows)
    wrong_n = sum(1 for r in rows if r[2])
    print(f"\nconfirmed right results {sum(r[1] for r in rows)}/{right_n}; rejected wrong results "
          f"{sum(1 for r in rows if r[2] and not r[3])}/{wrong_n} (false confirmations "
          f"{sum(1 for r in rows if r[3])}); model calls {sum(r[4] for r in rows)}")
    for kind in ("question", "file", "multistep", "impossible"):
        sel = [r for r in rows if r[0] == kind]
        if sel:
            print(f"  {kind:10} confirmed {sum(r[1] for r in sel)}/{len(sel)}  rejected "
                  f"{sum(1 for r in sel if r[2] and not r[3])}/{sum(1 for r in sel if r[2])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
