"""Pure logic of R3 and R4a with an in-process stand-in for the LLM (the processes, the bus and the
HTTP LLM path are covered by test_effector.py): tolerant step parsing, the duplicate guard, the
turn cap, prompt budgets, criterion matching, evidence grounding, environmental promotion and the
verdict decisions."""
from __future__ import annotations

from dataclasses import replace

import shlex
import subprocess

import pytest

from protocol.messages import Criterion, ExecutionResult, RunOptions, SubTask, ToolCallRecord
from services.safety import evidence, law1
from services.roles.agentval import AgentValidator, ValidatorReply, environmental_cause
from services.roles.executor import Executor, ExecutorStep, signature
from services.runtime.llm import RESAMPLE_TEMPERATURE, LLMError
from services.safety.tools import Toolbox


class FakeLLM:
    """Returns queued replies parsed into the requested model; records the prompts."""

    def __init__(self, *replies, local: bool = False):
        self.replies = list(replies)
        self.prompts: list[str] = []
        self.temperatures: list = []
        self.local = local

    def complete_text(self, system, user, task_id="", max_tokens=None, temperature=None):
        """The local executor's and the checker's plain-text protocol, from the same replies."""
        self.prompts.append(user)
        self.temperatures.append(temperature)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, str):
            return reply
        if "output_file" in reply:
            return f"FILE: {reply['output_file'] or 'none'}\nCOMMAND: {reply['command']}"
        if reply.get("action") == "tool":
            return f"COMMAND: {reply.get('command') or 'cat ' + reply['path']}"
        label = {"not_possible": "NOT POSSIBLE", "failed": "FAILED"}.get(reply.get("status"),
                                                                         "ANSWER")
        return f"{label}: {reply.get('output', '')}"

    def complete_json(self, model, system, user, task_id="", max_tokens=None):
        self.prompts.append(user)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return model.model_validate(reply)


def subtask(*criteria: str, **kw) -> SubTask:
    return SubTask(subtask_id="st-1", parent_task_id="run-unit", intent="do the thing",
                   success_criteria=[Criterion(text=c) for c in criteria],
                   options=RunOptions(), **kw)


def test_executor_step_tolerates_small_model_shapes():
    step = ExecutorStep.model_validate({"action": "shell", "args": {"command": "ls"}})
    assert (step.action, step.tool, step.command) == ("tool", "shell", "ls")
    step = ExecutorStep.model_validate({"tool": "write_file", "arguments": {
        "path": "a.json", "content": {"k": 1}}})
    assert step.action == "tool" and step.content == '{\n  "k": 1\n}'
    assert ExecutorStep.model_validate({"tool": "write_file", "path": "n", "content": 42}
                                       ).content == "42"
    step = ExecutorStep.model_validate({"output": "42", "status": "Done"})
    assert (step.action, step.status, step.output) == ("result", "completed", "42")
    assert ExecutorStep.model_validate({"action": "result", "status": "weird"}).status == \
        "uncertain"
    assert step.tool_args() == {}
    assert signature("shell", {"command": "ls  -la "}) == signature("shell", {"command": "ls -la"})


def test_validator_reply_tolerates_aliases():
    reply = ValidatorReply.model_validate({"criteria_results": [
        {"criterion": "a", "met": "yes"}, {"criterion": "b", "verdict": "pass"},
        {"criterion": "c", "met": False, "evidence": None}], "verdict": None})
    assert [c.met for c in reply.criteria] == [True, True, False]
    assert reply.criteria[2].evidence == "" and reply.verdict == ""


@pytest.mark.parametrize("text,cause", [
    ("cat: x: Permission denied", "permission"), ("ls: cannot access 'x': No such file",
                                                  "not-found"),
    ("bash: foo: command not found", "not-found"), ("curl: (7) Connection refused", "network"),
    ("timed out after 30s (process group killed)", "timeout"),
    ("[LAW1] refused: rm x — the operator declined", "law1"), ("wrong column chosen", None)])
def test_environmental_evidence(text, cause):
    assert environmental_cause(text) == cause


@pytest.fixture
def toolbox(settings):
    return Toolbox(settings)


def test_duplicate_guard_and_turn_cap(settings, toolbox):
    call = {"action": "tool", "tool": "shell", "command": "echo hi >> out.txt"}
    llm = FakeLLM(call, call, {"action": "tool", "tool": "list", "path": "."}, call,
                  {"action": "result", "output": "done"})
    ex = Executor(subtask("out.txt has two lines"), llm, toolbox, settings)
    result = ex.run_attempt(1)
    assert result.status == "completed" and result.output == "done"
    assert [c.tool for c in result.tool_calls] == ["shell", "list", "shell"]
    assert (settings.workspace / "out.txt").read_text() == "hi\nhi\n"   # A, A(blocked), B, A
    assert "DUPLICATE CALL NOT EXECUTED" in llm.prompts[2]
    capped = Executor(subtask("x"), FakeLLM(*[{"action": "tool", "tool": "list",
                                                "path": f"d{i}"} for i in range(3)]),
                      toolbox, replace(settings, executor_max_turns=3))
    result = capped.run_attempt(1)
    assert result.status == "uncertain" and "after 3 turns" in result.uncertainty
    assert len(result.tool_calls) == 3


def test_a_repeated_command_that_carries_an_answer_ends_the_attempt_with_it(settings, toolbox):
    # the small model re-sends "COMMAND: x / ANSWER: y" after x already ran: y is taken at once
    llm = FakeLLM("COMMAND: seq 7 8", "COMMAND: seq 7 8\nANSWER: 7", "ANSWER: never asked",
                  local=True)
    result = Executor(subtask("print seven"), llm, toolbox, settings).run_attempt(1)
    assert (result.status, result.output) == ("completed", "7")
    assert [c.output.split() for c in result.tool_calls] == [["7", "8"]]
    assert len(llm.prompts) == 2
    # a command that is new runs, whatever answer it came with
    fresh = FakeLLM("COMMAND: seq 8 9\nANSWER: 10", "ANSWER: 8", local=True)
    result = Executor(subtask("print eight"), fresh, toolbox, settings).run_attempt(1)
    assert (result.output, len(result.tool_calls)) == ("8", 1)


def test_executor_llm_error_is_a_failed_result(settings, toolbox):
    ex = Executor(subtask("x"), FakeLLM(LLMError("executor: LLM call failed: HTTP 500")),
                  toolbox, settings)
    result = ex.run_attempt(1)
    assert result.status == "failed" and "HTTP 500" in result.output


@pytest.mark.parametrize("local", [False, True])
def test_the_system_prompt_differs_between_workspaces_only_in_its_last_line(settings, tmp_path,
                                                                             local):
    # the llama.cpp prompt cache serves a prompt's longest known prefix: the workspace path
    # (new for every benchmark goal) must come after everything that is the same
    prompts = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        ws = replace(settings, workspace=tmp_path / name)
        ex = Executor(subtask("x"), FakeLLM(local=local), Toolbox(ws), ws)
        prompts.append(ex.system_prompt().splitlines())
    assert prompts[0][:-1] == prompts[1][:-1] and prompts[0][-1] != prompts[1][-1]
    assert str(tmp_path / "two") in prompts[1][-1]


def test_prompt_budgets_shrink_for_the_local_model(settings, toolbox):
    (settings.workspace / "big.txt").write_text("x" * 10_000)
    llm = FakeLLM({"action": "tool", "tool": "read_file", "path": "big.txt"},
                  {"action": "result", "output": "ok"}, local=True)
    result = Executor(subtask("x"), llm, toolbox, settings).run_attempt(1)
    assert len(result.tool_calls[0].output) < 1600
    # no date unless the goal speaks of time (a model copies the date into commands)
    assert "Today's date:" not in llm.prompts[0] and "Subtask: do the thing" in llm.prompts[0]
    assert "big.txt (10000 bytes" in llm.prompts[0]           # the workspace overview
    timed = FakeLLM({"action": "result", "output": "ok"}, local=True)
    Executor(SubTask(subtask_id="s", parent_task_id="t", intent="list files modified today"),
             timed, toolbox, settings).run_attempt(1)
    assert "Today's date:" in timed.prompts[0]


def test_the_executor_sees_the_file_the_goal_names_whole(settings, toolbox):
    from protocol.messages import Referent
    (settings.workspace / "app.ini").write_text("[web]\nport = 80\n[admin]\nport = 9090\n")
    st = subtask("x")
    st.referents = [Referent(kind="file", text="app.ini", role="read", status="found",
                             where=["app.ini"])]
    llm = FakeLLM({"action": "result", "output": "ok"}, local=True)
    Executor(st, llm, toolbox, settings).run_attempt(1)
    assert "--- app.ini (whole):\n[web]\nport = 80\n[admin]\nport = 9090" in llm.prompts[0]


def test_the_executor_is_told_the_paths_the_goal_makes_are_from_the_workspace_folder(
        settings, toolbox):
    from services.safety import referents
    (settings.workspace / "drafts").mkdir()
    (settings.workspace / "drafts" / "letter.txt").write_text("Dear Sam,\n")
    goal = "My name is Ada. Create a file hello.txt that says hello"
    st = subtask(goal)
    st.referents = [r.as_dict() for r in referents.resolve(goal, str(settings.workspace))]
    llm = FakeLLM({"action": "result", "output": "ok"}, local=True)
    Executor(st, llm, toolbox, settings).run_attempt(1)
    assert "To make (each exactly this path, from the workspace folder): hello.txt" in \
        llm.prompts[0]
    plain = FakeLLM({"action": "result", "output": "ok"}, local=True)
    Executor(subtask("How many lines does drafts/letter.txt have?"), plain, toolbox,
             settings).run_attempt(1)
    assert "To make" not in plain.prompts[0]


def backup_subtask(settings) -> SubTask:
    """A copy into a folder that does not exist yet, its referents resolved as the perceiver
    would (backup/todo.txt to make)."""
    from services.safety import referents
    (settings.workspace / "notes").mkdir()
    (settings.workspace / "notes" / "todo.txt").write_text("buy milk\n")
    goal = "Back up notes/todo.txt as backup/todo.txt (the backup folder doesn't exist yet)."
    st = SubTask(subtask_id="st-1", parent_task_id="run-unit", intent=goal, goal=goal,
                 success_criteria=[Criterion(text="done")], options=RunOptions())
    st.referents = [r.as_dict() for r in referents.resolve(goal, str(settings.workspace))]
    return st


def test_a_silent_first_step_does_not_end_the_attempt_while_the_file_to_make_is_missing(
        settings, toolbox):
    """`mkdir -p backup` printed nothing and made no file: the attempt goes on (the model is
    told what is still missing) instead of ending "uncertain" and spending a retry."""
    st = backup_subtask(settings)
    llm = FakeLLM({"action": "tool", "command": "mkdir -p backup"},
                  {"action": "tool", "command": "cp notes/todo.txt backup/todo.txt"}, local=True)
    result = Executor(st, llm, toolbox, settings).run_attempt(1)
    assert [c.target for c in result.tool_calls] == ["mkdir -p backup",
                                                     "cp notes/todo.txt backup/todo.txt"]
    assert "backup/todo.txt DOES NOT EXIST YET" in llm.prompts[1]
    assert result.status == "completed"
    assert (settings.workspace / "backup" / "todo.txt").read_text() == "buy milk\n"


def test_an_answer_while_the_file_to_make_is_missing_is_held_back_once(settings, toolbox):
    """After `mkdir -p backup` the small model answered "36" with backup/todo.txt missing (dev
    copy-into-new-folder): not done, so the attempt goes on with that said, once; a second
    answer ends the attempt as before (Law 0 judges it)."""
    st = backup_subtask(settings)
    llm = FakeLLM({"action": "result", "output": "36"},
                  {"action": "tool", "command": "cp notes/todo.txt backup-todo.txt"},
                  {"action": "result", "output": "done"}, local=True)
    result = Executor(st, llm, toolbox, settings).run_attempt(1)
    assert "NOT DONE: backup/todo.txt DOES NOT EXIST YET" in llm.prompts[1]
    assert [c.target for c in result.tool_calls] == ["cp notes/todo.txt backup-todo.txt"]
    assert result.output == "done" and len(llm.prompts) == 3
    # the re-ask is sampled freer (at temperature 0 it repeated "36"); after a call ran, not
    assert llm.temperatures == [None, RESAMPLE_TEMPERATURE, None]
    nothing = FakeLLM({"action": "result", "status": "not_possible", "output": "no source"},
                      local=True)
    assert Executor(st, nothing, toolbox, settings).run_attempt(1).status == "not_possible"
    assert len(nothing.prompts) == 1


def _result(records=(), status="completed", attempt=1, output="claimed"):
    return ExecutionResult(task_id="run-unit", subtask_id="st-1", attempt=attempt, status=status,
                           output=output, tool_calls=list(records))


OK_RECORD = ToolCallRecord(tool="shell", arguments={"command": "ls"}, target="ls", output="a b")


def test_validator_matches_criteria_by_text_then_position(settings):
    av = AgentValidator(subtask("first thing", "second thing"), FakeLLM({
        "criteria": [{"criterion": "Second thing.", "met": True, "evidence": "ls printed b"},
                     {"criterion": "reworded first", "met": True, "evidence": "ls printed a"}],
        "verdict": "matched"}),
        settings)
    j = av.judge(_result([OK_RECORD]))
    assert j.kind == "matched"
    assert [v.verdict for v in j.outcome.criteria_verdicts] == ["pass", "pass"]


def test_validator_failed_status_needs_no_llm_and_no_retry(settings):
    llm = FakeLLM()
    j = AgentValidator(subtask("c"), llm, settings).judge(_result(status="failed",
                                                                  output="disk gone"))
    assert j.kind == "failed" and llm.prompts == []
    assert "executor failed" in j.outcome.failure_reason


def test_validator_retry_then_failed_counts_attempts(settings):
    unmet = {"criteria": [{"criterion": "c", "met": False, "evidence": "nope",
                           "failure_class": "logical"}], "verdict": "retry",
             "what_was_wrong": "wrong file", "what_to_do": "use the right one"}
    av = AgentValidator(subtask("c"), FakeLLM(unmet, unmet), settings)
    first = av.judge(_result([OK_RECORD]))
    assert first.kind == "retry" and first.correction.what_to_do == "use the right one"
    assert first.correction.attempt_number == 1
    second = av.judge(_result([OK_RECORD], attempt=2))
    assert second.kind == "failed"
    assert second.outcome.failure_reason == "max retries (2) reached; last issue: wrong file"
    v = second.outcome.criteria_verdicts[0]
    assert (v.failed_attempts, v.attempts) == (2, 2)
    assert [p.attempt for p in second.outcome.gap_trajectory] == [1, 2]


def test_validator_promotes_and_stops_on_operator_denial(settings):
    denial = law1.law1_refusal("destructive action `rm x`",
                               law1.Decision(False, "operator", "no"))
    record = ToolCallRecord(tool="shell", target="rm x", output=denial, error=denial, law1=True)
    reply = {"criteria": [{"criterion": "x is gone", "met": False, "failure_class": "logical"}],
             "verdict": "retry"}
    j = AgentValidator(subtask("x is gone"), FakeLLM(reply), settings).judge(_result([record]))
    assert j.kind == "failed" and j.outcome.failure_reason.startswith("[LAW1] refused")
    assert j.outcome.criteria_verdicts[0].failure_class == "environmental"


def test_validator_scoring_error_is_failed_not_silent(settings):
    j = AgentValidator(subtask("c"), FakeLLM(LLMError("agentval: invalid LLM output")),
                       settings).judge(_result([OK_RECORD]))
    assert j.kind == "failed" and j.outcome.failure_reason.startswith("scoring error")


def test_blocked_tools_and_targets_are_enforced_in_code(settings, toolbox):
    st = subtask("x", blocked_tools=["web_search"], blocked_targets=["/data/missing.csv"])
    llm = FakeLLM({"action": "tool", "tool": "web_search", "query": "q"},
                  {"action": "tool", "tool": "read_file", "path": "/data/missing.csv"},
                  {"action": "result", "output": "gave up", "status": "failed"})
    result = Executor(st, llm, toolbox, settings).run_attempt(1)
    assert [c.error.split(" (")[0] for c in result.tool_calls] == [
        "the tool web_search is blocked for this subtask",
        "the target /data/missing.csv is blocked for this subtask"]
    assert "Do not touch these targets: /data/missing.csv" in llm.prompts[0]


def test_a_block_that_would_leave_no_tool_is_not_applied(settings, toolbox):
    """The local executor has only the shell: GGS blocking it cannot change the method."""
    (settings.workspace / "a.txt").write_text("hello\n")
    st = subtask("x", blocked_tools=["shell"], context=(
        "A previous attempt failed (break_symmetry: a novel approach).\nDo not use: shell\n"
        "MUST NOT use tool: shell (blocked by GGS)\nMUST NOT use again: rm x (failed before)"))
    llm = FakeLLM({"action": "tool", "command": "cat a.txt"}, {"action": "result", "output": "hello"},
                  local=True)
    result = Executor(st, llm, toolbox, settings).run_attempt(1)
    assert [(c.tool, c.error) for c in result.tool_calls] == [("shell", None)]
    assert "hello" in result.tool_calls[0].output
    prompt = llm.prompts[0]
    assert "Do not use these tools" not in prompt and "Do not use: shell" not in prompt
    assert "MUST NOT use tool: shell" not in prompt
    assert "A previous attempt failed" in prompt and "MUST NOT use again: rm x" in prompt


def test_huge_outputs_are_bounded(settings, toolbox):
    llm = FakeLLM({"action": "result", "output": "y" * 500_000})
    result = Executor(subtask("x"), llm, toolbox, settings).run_attempt(1)
    assert len(result.output) < 70_000 and "characters omitted" in result.output


def test_placeholder_evidence_is_not_evidence(settings):
    copied = {"criteria": [{"criterion": "c", "met": True,
                            "evidence": "<short quote from a record>"}], "verdict": "matched"}
    av = AgentValidator(subtask("c"), FakeLLM(copied), settings)
    assert av.judge(_result([OK_RECORD])).kind == "retry"
    assert "placeholder" in av.attempt_verdicts[0][0].evidence
    specific = {"criteria": [{"criterion": "c", "met": True, "evidence": "ls printed a b"}],
                "verdict": "matched"}
    assert AgentValidator(subtask("c"), FakeLLM(specific), settings).judge(
        _result([OK_RECORD])).kind == "matched"


def test_evidence_copied_from_the_claim_is_not_evidence(settings):
    copied = {"criteria": [{"criterion": "x.txt is gone", "met": True,
                            "evidence": "x.txt deleted successfully"}], "verdict": "matched"}
    av = AgentValidator(subtask("x.txt is gone"), FakeLLM(copied), settings)
    assert av.judge(_result([OK_RECORD], output="x.txt deleted successfully")).kind == "retry"
    assert "repeats the executor's claim" in av.attempt_verdicts[0][0].evidence


def test_evidence_restating_the_criterion_is_not_evidence(settings):
    copied = {"criteria": [{"criterion": "x.txt no longer exists", "met": True,
                            "evidence": "x.txt no longer exists"}], "verdict": "matched"}
    av = AgentValidator(subtask("x.txt no longer exists"), FakeLLM(copied), settings)
    assert av.judge(_result([OK_RECORD], output="done")).kind == "retry"
    assert "repeats the criterion" in av.attempt_verdicts[0][0].evidence


def test_local_plain_text_protocol_keeps_quotes_intact():
    from services.roles.executor import parse_local_step
    from services.roles.verifier import parse_derivation
    step = parse_local_step("COMMAND: awk -F, '$3==\"Norway\" {s+=$2} END {print s}' c.csv")
    assert step.action == "tool" and step.command.endswith("END {print s}' c.csv")
    assert parse_local_step("Sure.\n```bash\nls -la\n```").command == "ls -la"
    done = parse_local_step("ANSWER: 985000\nThe total is shown above.")
    assert (done.action, done.status, done.output) == ("result", "completed", "985000")
    assert parse_local_step("**NOT POSSIBLE**: no user alice").status == "not_possible"
    with pytest.raises(ValueError):
        parse_local_step("I think the answer is 42")
    d = parse_derivation("FILE: none\nCOMMAND: grep -c \"x y\" a.txt")
    assert (d.output_file, d.command) == ("", 'grep -c "x y" a.txt')
    assert parse_derivation("FILE: out.txt\nCOMMAND: `sort a.txt`").command == "sort a.txt"


def test_python_replies_run_as_programs_with_their_missing_imports(settings, toolbox):
    from services.roles.executor import parse_local_step
    from services.roles.programs import python_command
    step = parse_local_step("PYTHON:\n```python\nrows = list(csv.reader(open('a.csv')))\n"
                            "print(len(rows))\n```\nThis counts the rows.\nANSWER: 3")
    assert step.command.startswith("python3 -c ") and "import csv\n" in step.command
    assert "This counts" not in step.command and step.output == "3"
    own = "import json, os\nprint(os.sep, json.dumps(1))"
    assert python_command(own) == "python3 -c '" + own + "'"     # nothing added
    # a class used as if imported from its module: `import datetime` would not mend it
    mended = python_command("print(datetime.strptime('2024-03-01', '%Y-%m-%d').month, "
                            "Counter('aab').most_common(1)[0][0], os.sep)")
    assert mended.startswith("python3 -c 'from datetime import datetime\n"
                             "from collections import Counter\nimport os\n")
    assert subprocess.run(mended, shell=True, capture_output=True, text=True,
                          timeout=30).stdout.split() == ["3", "a", "/"]
    (settings.workspace / "n.txt").write_text("1\n2\n3\n")
    llm = FakeLLM("PYTHON:\nprint(sum(int(x) for x in open('n.txt')))", "ANSWER: 6", local=True)
    result = Executor(subtask("add up n.txt"), llm, toolbox, settings).run_attempt(1)
    assert (result.status, result.output) == ("completed", "6")
    assert result.tool_calls[0].output.strip() == "6" and not result.tool_calls[0].error


def test_programs_the_small_model_broke_in_two_known_ways_are_mended_and_run(tmp_path):
    # compound statements run together on one line, and an explanation written inside an
    # unfenced program (dev copy-into-new-folder, team-emails-clean at 713dd00): each a
    # SyntaxError that cost a round; a program that is wrong otherwise is left as it is
    from services.roles.programs import python_command
    (tmp_path / "todo.txt").write_text("a\nb\n")
    (tmp_path / "backup").mkdir()
    joined = python_command("with open('todo.txt') as f, open('backup/todo.txt', 'w') as g: "
                            "for line in f: g.write(line)")
    explained = python_command("emails = {'B@x.org', 'a@x.org'}\n"
                               "print('\\n'.join(sorted(e.lower() for e in emails)))\n\n"
                               "This program lowercases the emails, sorts them and prints them.\n"
                               "It uses a set to drop duplicates.")
    for command, out in ((joined, ""), (explained, "a@x.org\nb@x.org\n")):
        run = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30,
                             cwd=tmp_path)
        assert (run.returncode, run.stdout) == (0, out), (command, run.stderr)
    assert (tmp_path / "backup" / "todo.txt").read_text() == "a\nb\n"
    assert "This program" not in explained
    for broken in ("x = 1\nif x:\nprint(x)", "total = 0\nprint(tot"):
        assert python_command(broken) == "python3 -c " + shlex.quote(broken)
    # the same in a COMMAND: that is only `python3 -c`, the executor's or a checker's
    from services.roles.derivation import parse_derivation
    from services.roles.executor import parse_local_step
    one_line = ("python3 -c \"for n in open('todo.txt'): if n.strip() == 'b': print(n.strip())\"")
    for command in (parse_local_step("COMMAND: " + one_line).command,
                    parse_derivation("FILE: none\nCOMMAND: " + one_line).command):
        run = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30,
                             cwd=tmp_path)
        assert run.stdout == "b\n", (command, run.stderr)
    piped = one_line + " > out.txt"         # not only the program: left as the model wrote it
    assert parse_local_step("COMMAND: " + piped).command == piped


def test_an_answer_before_any_output_gives_way_to_the_action_that_follows_it(settings, toolbox):
    # "ANSWER: guess / PYTHON: program" as the first reply: the guess is unbacked, so the program
    # runs (it writes the file the goal asks for)
    (settings.workspace / "n.txt").write_text("1\n2\n3\n")
    write = "PYTHON:\nopen('t.txt', 'w').write(str(sum(int(x) for x in open('n.txt'))))"
    llm = FakeLLM("ANSWER: 7\n" + write, local=True)
    result = Executor(subtask("write the total of n.txt to t.txt"), llm, toolbox,
                      settings).run_attempt(1)
    assert (settings.workspace / "t.txt").read_text() == "6"
    assert len(result.tool_calls) == 1 and "7" not in str(result.output)


def test_a_python_one_liner_that_lost_its_line_breaks_is_answered_with_a_note(settings,
                                                                               toolbox):
    # the small model writes `python3 -c '…'` with its statements on one line: a SyntaxError it
    # repeated; the next prompt says why and asks for the multi-line PYTHON: form
    flat = "COMMAND: python3 -c 'import os for n in os.listdir(): print(n)'"
    llm = FakeLLM(flat, "PYTHON:\nimport os\nfor n in sorted(os.listdir()):\n    print(n)",
                  "ANSWER: done", local=True)
    (settings.workspace / "a.txt").write_text("a\n")
    (settings.workspace / "b.txt").write_text("b\n")
    Executor(subtask("list the files"), llm, toolbox, settings).run_attempt(1)
    assert "YOUR `python3 -c` COMMAND IS NOT VALID PYTHON" in llm.prompts[1]
    assert "NOT VALID PYTHON" not in llm.prompts[2]        # the multi-line program ran


def test_a_data_file_task_asks_for_python_first_and_again_after_a_rejected_program(settings, toolbox):
    from protocol.messages import CorrectionSignal
    (settings.workspace / "sales.csv").write_text("id,amount\n1,2.5\n2,4\n")
    (settings.workspace / "docs").mkdir()
    asks = lambda llm: llm.prompts[0].rsplit("\n", 1)[-1]   # noqa: E731
    llm = FakeLLM("PYTHON:\nprint(6.5)", "ANSWER: 6.5", "COMMAND: echo 6.5", "ANSWER: 6.5",
                  "COMMAND: echo 7", "ANSWER: 7", local=True)
    ex = Executor(subtask("total", goal="What is the total amount in sales.csv?"), llm, toolbox,
                  settings)
    ex.run_attempt(1)
    assert asks(llm) == "Reply with your first PYTHON: program." and llm.temperatures == [None]
    llm.prompts.clear()
    ex.run_attempt(2, CorrectionSignal(task_id="run-unit", subtask_id="st-1", attempt_number=1,
                                       what_was_wrong="wrong total"))
    # a program again (asked for a command, the model's first reply was a `find` on the file
    # in 40 of 76 dev retries), sampled freer: at temperature 0 it repeated the program
    assert asks(llm) == "Reply with your first PYTHON: program."
    assert llm.temperatures[1] == RESAMPLE_TEMPERATURE, llm.temperatures
    llm.prompts.clear()
    ex.run_attempt(3, CorrectionSignal(task_id="run-unit", subtask_id="st-1", attempt_number=2,
                                       what_was_wrong="sales.csv: joined its last line",
                                       what_to_do="reply COMMAND: printf '\\n%s\\n' 3,1 >> "
                                                  "sales.csv , then cat sales.csv"))
    assert asks(llm) == "Reply with your first COMMAND:."   # the fix spelt out is a command,
    # whatever form the task suits
    other = FakeLLM("COMMAND: ls docs", "ANSWER: none", "PYTHON:\nprint(1)", "ANSWER: 1",
                    local=True)
    ex = Executor(subtask("list", goal="What is in docs?"), other, toolbox, settings)
    ex.run_attempt(1)
    assert asks(other) == "Reply with your first COMMAND:."
    other.prompts.clear()
    ex.run_attempt(2, CorrectionSignal(task_id="run-unit", subtask_id="st-1", attempt_number=1,
                                       what_was_wrong="wrong list"))
    assert asks(other) == "Reply with your first PYTHON: program."   # the other form
    missing = FakeLLM("COMMAND: ls", "ANSWER: none", local=True)
    Executor(subtask("x", goal="Sum report.csv"), missing, toolbox, settings).run_attempt(1)
    assert asks(missing) == "Reply with your first COMMAND:."   # not there: nothing to parse


def test_calls_of_rejected_attempts_and_rounds_are_not_run_again(settings, toolbox):
    from protocol.messages import CorrectionSignal
    llm = FakeLLM("COMMAND: echo 1 >> log.txt", "COMMAND: echo 1 >> log.txt",
                  "COMMAND: echo 2 >> log.txt", local=True)
    ex = Executor(subtask("log"), llm, toolbox, settings)
    ex.run_attempt(1)
    result = ex.run_attempt(2, CorrectionSignal(task_id="run-unit", subtask_id="st-1",
                                                attempt_number=1, what_was_wrong="wrong"))
    assert (settings.workspace / "log.txt").read_text() == "1\n2\n"     # the repeat never ran
    assert "NOT RUN AGAIN" in llm.prompts[2] and len(result.tool_calls) == 1
    # a retry's first reply and the re-ask after a refused one: both freer
    assert llm.temperatures == [None, RESAMPLE_TEMPERATURE, RESAMPLE_TEMPERATURE]
    # a later round gets the earlier rounds' calls with its subtask: proposing only those ends
    # the attempt after two refusals, with nothing run
    tried = [ToolCallRecord(tool="shell", arguments={"command": "echo 1 >> log.txt"},
                            target="echo 1 >> log.txt", output="")]
    stuck = FakeLLM("COMMAND: echo 1 >> log.txt", "COMMAND:   echo 1  >> log.txt", local=True)
    result = Executor(subtask("log", tried_calls=tried), stuck, toolbox, settings).run_attempt(1)
    assert result.status == "failed" and "already failed" in result.uncertainty
    assert result.tool_calls == [] and (settings.workspace / "log.txt").read_text() == "1\n2\n"


def test_a_clean_call_that_prints_one_line_or_nothing_ends_the_attempt_without_asking(
        settings, toolbox):
    def run(*replies, goal=""):
        llm = FakeLLM(*replies, "ANSWER: never asked", local=True)
        result = Executor(subtask("q", goal=goal), llm, toolbox, settings).run_attempt(1)
        return result, len(llm.prompts)

    # one line printed: that is the answer (the model's own ANSWER was often miscopied)
    result, asked = run("COMMAND: echo Priya Natarajan")
    assert (result.status, result.output, asked) == ("completed", "Priya Natarajan", 1)
    # several lines, or an error: the model reads them and answers
    result, asked = run("COMMAND: printf '3\\n4\\n'", "ANSWER: 4")
    assert (result.output, asked) == ("4", 2)
    result, asked = run("COMMAND: cat missing.txt", "NOT POSSIBLE: no missing.txt")
    assert (result.status, asked) == ("not_possible", 2)
    # nothing printed: a finished write if a file changed, else nothing was found
    result, asked = run("COMMAND: echo hi > made.txt", goal="Write hi to made.txt")
    assert (result.status, asked) == ("completed", 1) and (settings.workspace / "made.txt").exists()
    assert not evidence.answer_values(result.output)
    result, asked = run("COMMAND: grep -l zebra made.txt", goal="Which file mentions zebra?")
    assert (result.status, asked) == ("not_possible", 1)
    result, asked = run("COMMAND: true", goal="Write the zebras to zebras.txt")
    assert (result.status, asked) == ("uncertain", 1)
    # a program ending in a bare expression prints it; `open(...) as f:` gets its `with`
    result, asked = run("PYTHON:\nopen('made.txt') as f:\n    rows = f.readlines()\nlen(rows)")
    assert (result.status, result.output, asked) == ("completed", "1", 1)


def test_a_program_is_never_shown_flattened_into_one_line():
    """The 1.5B model copied a program whose lines a prompt had joined back as its next command
    (`python3 -c 'import json import csv # …`: a SyntaxError); its first line stands for it."""
    from services.roles.executor import describe_call
    program = "python3 -c 'import json\nimport csv\n\nprint(1)'"
    assert describe_call(ToolCallRecord(tool="shell", target=program, output="1")) == \
        "shell python3 -c 'import json … (3 lines) → ok"
    assert describe_call(ToolCallRecord(tool="shell", target="ls   -la", output="x")) == \
        "shell ls -la → ok"


def test_a_call_that_printed_only_errors_is_not_shown_as_ok():
    """`find … -exec rename …` without `rename` exits 0 and prints one error per file: the
    retry prompt listed it "→ ok", as if the files had been renamed."""
    from services.roles.executor import describe_call
    out = "find: ‘rename’: No such file or directory\n" * 3
    line = describe_call(ToolCallRecord(tool="shell", target="find d -exec rename x {} \\;",
                                        output=out))
    assert line.endswith("→ did nothing, it printed only errors: "
                         "find: ‘rename’: No such file or directory"), line
    mixed = "renamed a.txt\nmv: cannot stat 'b.txt': No such file or directory\n"
    assert describe_call(ToolCallRecord(tool="shell", target="x", output=mixed)).endswith("→ ok")


def test_a_correction_that_asks_for_a_program_gets_the_program_form(settings, toolbox):
    """After a rejected program the other form is asked for — unless the correction itself says
    to write a PYTHON: program (asked for a command, the model wrote `touch lists/books.md`)."""
    from protocol.messages import CorrectionSignal
    from services.roles.programs import PYTHON_PREFIX
    tried = ToolCallRecord(tool="shell", arguments={"command": PYTHON_PREFIX + "print(1)'"},
                           target=PYTHON_PREFIX + "print(1)'", output="1")

    def first_prompt(what_to_do: str) -> str:
        st = subtask("x", tried_calls=[tried])
        llm = FakeLLM({"action": "result", "output": "ok"}, local=True)
        fix = CorrectionSignal(task_id="run-unit", subtask_id="st-1", attempt_number=1,
                               failed_criterion="x", what_was_wrong="no file",
                               what_to_do=what_to_do)
        Executor(st, llm, toolbox, settings).run_attempt(2, fix)
        return llm.prompts[0]
    assert "Reply with your first COMMAND:." in first_prompt("use another approach")
    assert "Reply with your first PYTHON: program." in first_prompt(
        "write the result into a.md (in a PYTHON: program, open('a.md', 'w').write(...))")


def test_a_spare_that_cannot_reach_the_bus_waits_without_a_client(settings):
    """`connect_early` (a spare effector's wait): with no proxy to answer, it gives up after the
    ready time-out and returns None — the subtask then connects on its own, as without a spare —
    and still leaves the attempt's sandbox started for the toolbox to adopt."""
    from services.roles import effector
    from services.safety import sandbox, sandbox_session
    quick = replace(settings, ready_timeout_s=0.5)
    sandbox_session.SPARE = None
    try:
        assert effector.connect_early(quick) is None
        spare = sandbox_session.SPARE
        if sandbox.status(quick).mode == "bubblewrap" and sandbox_session.usable(quick):
            assert spare is not None and not spare.error
            box = Toolbox(quick)
            box.prewarm()
            assert box._session(box.network, True) is spare      # adopted, not a second one
            out = box.run("shell", {"command": "basename $PWD"})
            assert out.output.strip() == quick.workspace.name and spare.spawn_ms > 0
            box.close()
        else:
            assert spare is None
    finally:
        if sandbox_session.SPARE is not None:
            sandbox_session.SPARE.close()
        sandbox_session.SPARE = None


def test_the_tool_journal_syncs_before_a_side_effect_and_nowhere_else(settings, monkeypatch):
    """`started` reaches the disk before the call runs, and with it the `before` picture written
    ahead of it (one file); `finished` is left to the page cache (a killed process loses none of
    it, and a lost one reads as started-not-finished, which the re-run handles)."""
    import json
    from services.runtime import journal as journal_mod
    synced: list[int] = []
    monkeypatch.setattr(journal_mod.os, "fsync", lambda fd: synced.append(fd))
    j = journal_mod.ToolJournal(settings, "run-sync", "st-1")
    j.record_before({}, "")
    assert synced == []
    j.started("1:1:x", "shell", {"command": "ls"}, "d0")
    assert len(synced) == 1
    j.finished("1:1:x", "out", None)
    assert len(synced) == 1
    j.started("1:2:y", "shell", {"command": "ls"}, "", durable=False)   # changes nothing
    assert len(synced) == 1
    with open(j.path, encoding="utf-8") as fh:
        states = [json.loads(line)["state"] for line in fh]
    assert states == ["before", "started", "finished", "started"]


def test_only_a_call_that_may_change_something_is_synced_and_pictured_before_it_runs(
        settings, toolbox, monkeypatch):
    """The executor journals every call, but pays for the disk sync and the workspace picture
    (what decides whether a call cut short by a restart is made again) only for a call that may
    change something: a command the Law 1 gate does not class as read-only, a write. A read-only
    one is simply made again. The gate parses each command once for both decisions."""
    import json
    from services.runtime import journal as journal_mod
    from services.safety import law1 as law1_mod
    synced: list[int] = []
    monkeypatch.setattr(journal_mod.os, "fsync", lambda fd: synced.append(fd))
    parsed: list[str] = []
    classify = law1_mod.classify
    monkeypatch.setattr(law1_mod, "classify",
                        lambda command, **kw: parsed.append(command) or classify(command, **kw))
    (settings.workspace / "a.txt").write_text("x\n")
    calls = [{"action": "tool", "tool": "shell", "command": "wc -l a.txt"},
             {"action": "tool", "tool": "read_file", "path": "a.txt"},
             {"action": "tool", "tool": "shell", "command": "echo y >> a.txt"},
             {"action": "tool", "tool": "write_file", "path": "b.txt", "content": "z"},
             {"action": "result", "output": "done"}]
    journal = journal_mod.ToolJournal(settings, "run-changes", "st-1")
    ex = Executor(subtask("a.txt has two lines"), FakeLLM(*calls), toolbox, settings,
                  journal=journal)
    assert ex.run_attempt(1).status == "completed"
    with open(journal.path, encoding="utf-8") as fh:
        started = [r for r in map(json.loads, fh) if r["state"] == "started"]
    assert [(r["tool"], bool(r["digest"])) for r in started] == [
        ("shell", False), ("read_file", False), ("shell", True), ("write_file", True)]
    assert len(synced) == 2
    assert parsed == ["wc -l a.txt", "echo y >> a.txt"]
    assert toolbox.may_change("mcp_server__send", {}) and not toolbox.may_change("list", {})


class TimedLLM(FakeLLM):
    """A FakeLLM whose endpoint answered its last call in `ms` milliseconds."""

    def __init__(self, ms: float, *replies):
        super().__init__(*replies)
        self.ms = ms

    def recent_latency_ms(self) -> float:
        return self.ms


def test_the_first_derivation_goes_ahead_only_where_model_calls_are_slow(settings):
    """`confirm.derive_ahead` starts R4a's first derivation on a thread where the endpoint's
    calls take AHEAD_MIN_MS or more (a second connection costs less than the call it overlaps),
    never on quicker ones nor without the before-copy; the check then uses that derivation
    instead of asking again."""
    from services.roles.confirm import AHEAD_MIN_MS, derive_ahead
    from services.roles.verifier import Verifier
    (settings.workspace / "n.txt").write_text("1\n2\n")
    goal = subtask("counted", goal="count the lines of n.txt")
    for ms, ahead in ((AHEAD_MIN_MS / 10, False), (AHEAD_MIN_MS * 2, True)):
        llm = TimedLLM(ms, "FILE: none\nCOMMAND: grep -c . n.txt")
        checker = Verifier(goal, llm, settings)
        derive_ahead(checker)
        assert checker.ahead is None                 # not started: no before-copy yet
        checker.start()
        try:
            derive_ahead(checker)
            assert (checker.ahead is not None) == ahead
            first = checker.derive()
            assert first.available and first.output.strip() == "2"
            assert len(llm.prompts) == 1             # asked once, ahead or not
        finally:
            checker.close()


def test_the_first_derivation_never_goes_ahead_on_the_bundled_model(settings):
    """The bundled model answers one request at a time: a derivation beside the scoring call
    would only queue behind it, so there the two follow each other, however slow the calls."""
    from services.roles.confirm import AHEAD_MIN_MS, derive_ahead
    from services.roles.verifier import Verifier
    llm = TimedLLM(AHEAD_MIN_MS * 100, "FILE: none\nCOMMAND: ls")
    llm.local = True
    checker = Verifier(subtask("listed", goal="list the files"), llm, settings)
    checker.start()
    try:
        derive_ahead(checker)
        assert checker.ahead is None and llm.prompts == []
    finally:
        checker.close()
