"""The agent benchmark's runner goes on with an interrupted run (`run.py --resume`): a whole
`--half both` run takes longer than some sessions on a 2-core machine. Real runner process, real
HTTP server for the model (scripted), the ReAct system only (no daemon)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scripted_llm import ScriptedLLM

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "agent" / "run.py"
GOALS = "average-age-json,big-orders-json"


def runner(tmp_path: Path, llm: ScriptedLLM, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **llm.env(), "ARTOO_HOME": str(tmp_path / "default-home")}
    return subprocess.run([sys.executable, str(RUN), "--half", "dev", "--systems", "react",
                           "--only", GOALS, "--out", str(tmp_path / "r.json"), *extra],
                          env=env, capture_output=True, text=True, timeout=300)


def test_an_interrupted_run_goes_on_from_the_first_goal_it_did_not_record(tmp_path):
    with ScriptedLLM() as llm:
        llm.on("*", lambda req: '{"action": "finish", "answer": "37", "possible": true}')
        first = runner(tmp_path, llm)
        assert first.returncode == 0, first.stderr
        whole = json.loads((tmp_path / "r.json").read_text())
        assert whole["finished"] and [r["id"] for r in whole["results"]] == \
            ["average-age-json", "big-orders-json"]
        assert llm.calls() == 2
        # cut short after its first goal (an older results file: no commit recorded)
        cut = dict(whole, finished=False, results=whole["results"][:1])
        cut.pop("commit")
        (tmp_path / "r.json").write_text(json.dumps(cut))
        resumed = runner(tmp_path, llm, "--resume")
        assert resumed.returncode == 0, resumed.stderr
        assert "resuming: 1 results recorded" in resumed.stdout + resumed.stderr
        assert llm.calls() == 3                     # only the goal it had not recorded ran
        done = json.loads((tmp_path / "r.json").read_text())
        assert done["finished"] and done["results"][0] == whole["results"][0]
        assert [r["id"] for r in done["results"]] == ["average-age-json", "big-orders-json"]
        assert done["date"] == whole["date"] and len(done["resumed"]) == 1
        assert done["artoo_home"] == whole["artoo_home"]          # the run's own home
        assert done["summary"]["dev"]["react"]["goals"] == 2
        # a finished run, another selection, or other code: refused, nothing run
        refused = runner(tmp_path, llm, "--resume")
        assert refused.returncode == 2 and "is a finished run" in refused.stderr
        (tmp_path / "r.json").write_text(json.dumps(cut))
        other = subprocess.run([sys.executable, str(RUN), "--half", "dev", "--systems", "react",
                                "--only", "average-age-json", "--out", str(tmp_path / "r.json"),
                                "--resume"], env={**os.environ, **llm.env()},
                               capture_output=True, text=True, timeout=300)
        assert other.returncode == 2 and "other only" in other.stderr
        first_commit = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"],
                                      cwd=RUN.parent, capture_output=True, text=True).stdout
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=RUN.parent, capture_output=True,
                              text=True).stdout
        if first_commit.split() and first_commit.split()[0] != head.strip():   # not shallow
            (tmp_path / "r.json").write_text(json.dumps(dict(cut, commit=first_commit.split()[0])))
            old = runner(tmp_path, llm, "--resume")
            assert old.returncode == 2 and "code differs" in old.stderr
        assert llm.calls() == 3
