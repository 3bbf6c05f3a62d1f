"""The agent benchmark's checkers (benchmarks/agent/), tested against the reference solutions.

For every goal of both halves: setup.sh in a fresh directory, reference.sh, then check.py must
pass; and a set of wrong outcomes must fail: an empty answer claimed verified; for questions the
expected value sprayed together with each distractor, and each distractor alone; for file goals
the workspace without its output files or with a wrong extra line; for impossible goals a
verified answer stating the near-match value; for every goal a modified input file. No model.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "benchmarks" / "agent"
sys.path.insert(0, str(ROOT / "lib"))
import check_util  # noqa: E402

HALVES = ("dev", "heldout")
KINDS = ("question", "file", "multistep", "impossible")
GOALS = sorted(p for half in HALVES for p in (ROOT / "goals" / half).iterdir() if p.is_dir())


def _goal(goal_dir: Path) -> dict:
    return json.loads((goal_dir / "goal.json").read_text())


def _spec(goal_dir: Path):
    name = f"bench_check_{goal_dir.parent.name}_{goal_dir.name}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, goal_dir / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SPEC


def _fmt(value) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}"
    if isinstance(value, (int, float)):
        return str(int(value))
    return str(value)


def _judge(spec, goal_dir: Path, ws: Path, answer: str, status: str) -> tuple[bool, str]:
    return check_util.judge(spec, ws, {"answer": answer, "status": status}, goal_dir / "setup.sh")


def _setup(goal_dir: Path, ws: Path) -> None:
    ws.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(goal_dir / "setup.sh")], cwd=ws, check=True, timeout=60)


# ---------------------------------------------------------------------------------------------
# the goal set
# ---------------------------------------------------------------------------------------------

def test_each_half_has_enough_goals_of_every_kind():
    for half in HALVES:
        goals = [g for g in GOALS if g.parent.name == half]
        assert len(goals) >= 22, f"{half}: {len(goals)} goals"
        kinds = {_goal(g)["kind"] for g in goals}
        assert kinds == set(KINDS), f"{half}: kinds {kinds}"


def test_goal_files_are_well_formed_and_the_halves_differ():
    texts = {}
    for g in GOALS:
        data = _goal(g)
        assert set(data) == {"goal", "kind"}, g
        assert data["kind"] in KINDS, g
        assert data["goal"].strip(), g
        for name in ("setup.sh", "reference.sh", "check.py"):
            assert (g / name).is_file(), f"{g}/{name}"
        texts.setdefault(data["goal"].strip().lower(), []).append(g)
        spec = _spec(g)
        expected_cls = {"question": check_util.Question, "impossible": check_util.Impossible}.get(
            data["kind"], check_util.FileGoal)
        assert isinstance(spec, expected_cls), g
    assert all(len(v) == 1 for v in texts.values()), "two goals with the same text"
    dev_ids = {g.name for g in GOALS if g.parent.name == "dev"}
    held_ids = {g.name for g in GOALS if g.parent.name == "heldout"}
    assert not dev_ids & held_ids


def test_setup_is_deterministic(tmp_path):
    for g in GOALS:
        ws = tmp_path / g.name
        _setup(g, ws)
        made = {str(p.relative_to(ws)): p.read_bytes() for p in ws.rglob("*") if p.is_file()}
        assert made, f"{g}: setup.sh made no files"
        # setup_files runs it once more (and caches the result for the checkers below)
        assert made == check_util.setup_files((g / "setup.sh").resolve()), g


# ---------------------------------------------------------------------------------------------
# per goal: the reference passes, wrong outcomes fail
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("goal_dir", GOALS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_passes_and_wrong_outcomes_fail(goal_dir: Path, tmp_path: Path):
    kind = _goal(goal_dir)["kind"]
    spec = _spec(goal_dir)
    ws = tmp_path / "ws"
    _setup(goal_dir, ws)
    pristine = tmp_path / "pristine"
    shutil.copytree(ws, pristine)
    result_file = tmp_path / "result.json"
    subprocess.run(["bash", str(goal_dir / "reference.sh"), str(result_file)], cwd=ws, check=True,
                   timeout=60)
    reference = json.loads(result_file.read_text())
    assert reference["status"] == ("not_possible" if kind == "impossible" else "verified")

    # the reference passes, through the command line
    proc = subprocess.run([sys.executable, str(goal_dir / "check.py"), str(ws), str(result_file)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("PASS: ") and proc.stdout.count("\n") == 1, proc.stdout

    def fails(workspace: Path, answer: str, status: str, why: str) -> None:
        ok, reason = _judge(spec, goal_dir, workspace, answer, status)
        assert not ok, f"{why}: passed ({reason})"

    # an empty answer claimed verified, on the untouched workspace
    fails(pristine, "", "verified", "empty answer, verified")

    if kind == "question":
        fails(ws, reference["answer"], "not_possible", "possible goal reported not possible")
        expected = _fmt(spec.expected)
        assert _judge(spec, goal_dir, ws, f"The answer is {expected}.", "verified")[0]
        assert _judge(spec, goal_dir, ws, f"The answer is {expected}.", "unverified")[0]
        # giving up is no answer, even when the reason quotes the value it rejected
        fails(ws, f"Task abandoned: the answer states {expected}, which no tool output shows.",
              "abandoned", "abandoned, quoting a rejected value")
        assert spec.distractors, "a question needs distractors"
        for d in spec.distractors:
            fails(ws, f"The answer is {expected} or {_fmt(d)}.", "verified", f"sprayed {d!r}")
            fails(ws, f"It could be {_fmt(d)}, or possibly {expected}.", "unverified",
                  f"sprayed {d!r} first")
            fails(ws, f"The answer is {_fmt(d)}.", "verified", f"distractor {d!r} alone")
        fails(ws, "The answer is 987654.", "verified", "an invented value")
        fails(ws, f"error: connection reset after {expected}", "error", "an error message")
    elif kind in ("file", "multistep"):
        fails(ws, reference["answer"], "not_possible", "possible goal reported not possible")
        broken = tmp_path / "broken"
        for rel in spec.outputs:
            # the output file missing
            shutil.rmtree(broken, ignore_errors=True)
            shutil.copytree(ws, broken)
            (broken / rel).unlink()
            fails(broken, reference["answer"], "verified", f"{rel} missing")
            # a wrong extra line
            shutil.rmtree(broken)
            shutil.copytree(ws, broken)
            with open(broken / rel, "a") as f:
                f.write("\nextra line\n")
            fails(broken, reference["answer"], "verified", f"{rel} with an extra line")
        for rel in spec.absent:
            shutil.rmtree(broken, ignore_errors=True)
            shutil.copytree(ws, broken)
            shutil.copy(pristine / rel, broken / rel)
            fails(broken, reference["answer"], "verified", f"{rel} left in place")
    else:  # impossible
        assert spec.near, "an impossible goal needs near-match values"
        for v in spec.near:
            fails(ws, f"The value is {_fmt(v)}.", "verified", f"near match {v!r}, verified")
            fails(ws, f"Not found exactly, but the closest is {_fmt(v)}.", "unverified",
                  f"near match {v!r}, unverified")
        fails(ws, "It does not exist.", "verified", "verified on an impossible goal")
        fails(ws, "Done.", "unverified", "unverified without saying it does not exist")
        fails(ws, "error: No such file or directory", "error", "an error message")
        assert _judge(spec, goal_dir, ws, "That does not exist in the workspace.", "unverified")[0]
        fails(ws, "Task abandoned. No usable output was obtained.", "abandoned",
              "giving up is not reporting that it cannot be done")
        assert _judge(spec, goal_dir, ws, reference["answer"], "not_possible")[0]

    # an input file changed that the goal does not allow to change
    allowed = set()
    if isinstance(spec, check_util.FileGoal):
        allowed = {*spec.outputs, *spec.absent, *spec.allow_changed}
    inputs = sorted(str(p.relative_to(pristine)) for p in pristine.rglob("*") if p.is_file())
    victim = next((rel for rel in inputs if rel not in allowed), None)
    if victim is None:
        return
    tampered = tmp_path / "tampered"
    shutil.copytree(ws, tampered)
    with open(tampered / victim, "a") as f:
        f.write("tampered\n")
    ok, reason = check_util.judge(spec, tampered, reference, goal_dir / "setup.sh")
    assert not ok and victim in reason, f"{victim} modified: {ok} {reason}"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def test_numbers_in_ignores_numbers_inside_names():
    assert check_util.numbers_in("data2.csv has 12 rows") == [12.0]
    assert check_util.numbers_in("total: 1,234.50 EUR") == [1234.5]
    assert check_util.numbers_in("either 3,4 or 5") == [3.0, 4.0, 5.0]
    assert check_util.numbers_in("it was -3.5 C; 245ms") == [-3.5, 245.0]
    assert check_util.numbers_in("v1.2 of report_2023.txt") == []


def test_tokens_respect_word_and_path_boundaries():
    assert not check_util.has_token("alicia@example.com", "alice")
    assert not check_util.has_token("dump.sql.gz", "dump.sql")
    assert check_util.has_token("see ./a/dump.sql.", "dump.sql")
    assert check_util.has_token("It is in docs/2024/mar-meeting.txt", "mar-meeting.txt")


def test_same_text_allows_only_a_trailing_newline_difference():
    assert check_util.same_text("a\nb", "a\nb\n")
    assert not check_util.same_text("a\nb\n\nc", "a\nb\nc\n")
    assert not check_util.same_text("a \nb", "a\nb")
    assert check_util.same_text("a \nb", "a\nb", trailing_ws=True)


def test_result_json_from_a_file_or_inline(tmp_path):
    f = tmp_path / "r.json"
    f.write_text('{"answer": 12, "status": "verified"}')
    assert check_util.load_result(str(f)) == {"answer": "12", "status": "verified"}
    assert check_util.load_result('{"status": "error"}')["answer"] == ""


def test_a_benchmark_run_gets_a_fresh_artoo_home_with_the_users_model(tmp_path, monkeypatch):
    """No memory, world fact or task of an earlier run of the same goals is recalled: run.py's
    default ARTOO_HOME is a new directory sharing only the model and `.env`."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    user = tmp_path / "user-home"
    (user / "models").mkdir(parents=True)
    (user / "models" / "m.gguf").write_bytes(b"GGUF")
    (user / "memory.lmdb").mkdir()
    (user / ".env").write_text("OPENAI_MODEL=x\n")
    monkeypatch.setenv("ARTOO_HOME", str(user))
    home, fresh = run.use_home(None)
    try:
        assert fresh and home != user and str(home) == __import__("os").environ["ARTOO_HOME"]
        assert sorted(p.name for p in home.iterdir()) == [".env", "models"]
        assert (home / "models" / "m.gguf").read_bytes() == b"GGUF"
        assert run.use_home(user) == (user.resolve(), False)     # --home: used as it is
    finally:
        shutil.rmtree(home)
