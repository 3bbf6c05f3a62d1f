"""How often the independent check itself is right, per form (dev half).

For each dev goal: the Law 0 checker's derivation in the form Law 0 picks for the goal (a
PYTHON program for a goal about a data file, else a shell COMMAND) and in the other form, each
judged by the goal's own checker as if it were the answer (a file goal: the derived content
written to the file on a copy of the workspace). A wrong derivation that agrees with a wrong
executor is a false claim's way in; the table shows how often two forms agree while wrong. No
daemon; the GGUF in this process at temperature 0. Dev goals only.

    .venv/bin/python benchmarks/agent/derivations_only.py [GOAL_ID ...]
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from executor_only import judge, load, prepare  # noqa: E402
from services.roles.programs import names_data_file  # noqa: E402
from services.roles.verifier import Verifier  # noqa: E402
from services.safety import evidence as ev  # noqa: E402


def judge_derivation(goal_dir: Path, ws: Path, derived) -> str:
    """PASS/FAIL of the goal's checker on the derivation, or '-' when it gave nothing usable."""
    if not derived.available:
        return "-"
    with tempfile.TemporaryDirectory(prefix="artoo-chk-") as work:
        copy = Path(work) / "ws"
        shutil.copytree(ws, copy)
        answer, status = derived.output.strip(), "verified"
        if derived.output_file:
            target = copy / derived.output_file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(derived.output if derived.output.endswith("\n") or
                              not derived.output else derived.output + "\n")
            answer = f"wrote {derived.output_file}"
        elif ev.is_absence(derived.output):
            answer, status = "not possible: it does not exist", "not_possible"
        return "PASS" if judge(goal_dir, copy, answer, status).returncode == 0 else "FAIL"


def run_goal(gid: str, llm) -> tuple[str, str, bool]:
    goal_dir, goal, root, settings, subtask = prepare(gid, "artoo-chk-")
    ws = root / "ws"
    verifier = Verifier(subtask, llm, settings, goal=goal)
    verifier.start()
    natural = bool(names_data_file(goal, str(ws)))
    first, second = verifier.derive_as(natural), verifier.derive_as(not natural)
    a, b = judge_derivation(goal_dir, ws, first), judge_derivation(goal_dir, ws, second)
    agree = first.available and second.available and ev.agree(
        first.output, second.output, goal=goal).agree
    verifier.close()
    shutil.rmtree(root, ignore_errors=True)
    print(f"{gid:24} {'py ' if natural else 'sh '} first {a:4}  other {b:4}  "
          f"agree {'yes' if agree else 'no '}  | {first.output.strip()[:40]!r} "
          f"| {second.output.strip()[:40]!r}", flush=True)
    return a, b, agree


def main(argv: list[str]) -> int:
    llm, ids = load(argv)
    if llm is None:
        return 2
    rows = [run_goal(gid, llm) for gid in ids]
    n = len(rows)
    print(f"first form right {sum(a == 'PASS' for a, _, _ in rows)}/{n}, other form right "
          f"{sum(b == 'PASS' for _, b, _ in rows)}/{n}; both agree {sum(g for *_, g in rows)}, "
          f"of which the first is wrong {sum(g and a != 'PASS' for a, _, g in rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
