"""The web console's test harness: the real daemon on the scripted LLM (the `e2e` fixture pattern of
test_pipeline_e2e.py), one scripted run that GGS judges in two rounds (a task-level rejection, then
an accept), and a `WebConsole` serving that ARTOO_HOME on a free port with its live feed."""
from __future__ import annotations

import io
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from audit_support import wait_until
from conftest import scripted_daemon
from replies_effector import SubtaskScript, all_met, result, shell
from replies_pipeline import accept, perception, plan, reject, subtask
from scripted_llm import ScriptedLLM
from services.runtime import auditlog


def _simple(script: SubtaskScript, workspace: Path, intent: str, output: str, crit: list[str]):
    name = f"data-{abs(hash(output)) % 10**8}.txt"
    (workspace / name).write_text(output + "\n")
    script.executor(intent, shell(f"cat {name}"), result(output))
    script.agentval(intent, all_met(*crit, evidence=f"the tool printed {output}"))


def two_round_run(env) -> str:
    """Submit and finish a run: round 0 rejected at task level (replan), round 1 accepted."""
    rid = f"run-web-{time.monotonic_ns() % 10**8}"
    first, second = f"list sizes {rid}", f"list sizes again {rid}"
    crit = ["the largest file is named", "its size is given"]
    _simple(env.script, env.settings.workspace, first, "a.txt-b.txt", ["sizes listed"])
    _simple(env.script, env.settings.workspace, second, "largest=b.txt-2048", ["sizes listed"])
    env.llm.add("perceiver", perception("name the largest file"), task=rid)
    env.llm.add("planner", plan(subtask(first, ["sizes listed"]), task_criteria=crit), task=rid)
    env.llm.add("planner", plan(subtask(second, ["sizes listed"]), task_criteria=crit), task=rid)
    env.llm.add("metaval", reject("the largest file is not named", [(c, "fail") for c in crit]),
                task=rid)
    env.llm.add("metaval", accept("b.txt is the largest (2048 bytes)", merged_output="b.txt 2048",
                                  verdicts=[(c, "pass") for c in crit]), task=rid)
    env.session.submit("name the largest file", run_id=rid, deadline_s=60)
    final = env.session.follow(rid, 60)
    assert final is not None and final.directive == "accept", final
    # the tap writes the audit log behind the bus: the console's task page reads the run's
    # messages from it, so the tests start once its FinalResult is there
    wait_until(lambda: any(r.topic.startswith(b"FinalResult/") and rid.encode() in r.topic
                           for r in auditlog.iter_records(env.settings.audit_dir / "log")),
               20, "the run's FinalResult in the audit log")
    return rid


@contextmanager
def web_daemon():
    from rich.console import Console
    from services.cli.run import RunSession
    from services.cli.webconsole import WebConsole
    with ScriptedLLM() as llm, scripted_daemon(llm, prefix="at-web-", scale=1) as (settings, root):
        session = console = None
        try:
            console = WebConsole(settings, port=0).start()
            session = RunSession(settings, Console(file=io.StringIO(), width=160),
                                 interactive=False)
            script = SubtaskScript()
            for role in ("executor", "agentval", "verifier"):
                llm.on(role, script.responder(role))
            env = SimpleNamespace(settings=settings, llm=llm, session=session, root=root,
                                  script=script, console=console)
            deadline = time.monotonic() + 10
            while console.feed.client is None and time.monotonic() < deadline:
                time.sleep(0.05)        # the live feed connects in the background
            env.rid = two_round_run(env)
            yield env
        finally:
            if session is not None:
                session.close()
            if console is not None:
                console.stop()
