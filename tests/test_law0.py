"""Law 0 in R4a: each code check catches its failure shape (invented value, missing file, wrong
content, self-contradicting verdict, re-derivation disagreement, impossible goal), with a real
toolbox and workspace and an in-process stand-in for the LLM. The same checks run end to end over
the bus with the scripted HTTP LLM in test_pipeline_e2e.py."""
from __future__ import annotations

import dataclasses
import os

import pytest

from protocol.messages import Criterion, ExecutionResult, RunOptions, SubTask, ToolCallRecord
from services.roles.agentval import AgentValidator
from services.safety.tools import Toolbox
from services.roles.verifier import Verifier
from services.safety import evidence as ev

from test_effector_units import FakeLLM


def subtask(goal: str, context: str = "") -> SubTask:
    return SubTask(subtask_id="st-1", parent_task_id="run-law0", intent=goal, goal=goal,
                   success_criteria=[Criterion(text="the goal is achieved")],
                   options=RunOptions(), context=context)


@pytest.fixture
def ws(settings):
    (settings.workspace / "cities.csv").write_text(
        "city,population,country\nOslo,700000,Norway\nLyon,520000,France\n"
        "Bergen,285000,Norway\n")
    (settings.workspace / "app.log").write_text("INFO a\nERROR b\nINFO c\nERROR d\n")
    return settings.workspace


def run(settings, command: str) -> ToolCallRecord:
    out = Toolbox(settings).run("shell", {"command": command})
    return ToolCallRecord(tool="shell", arguments={"command": command}, target=command,
                          output=out.output, error=out.error)


@pytest.fixture(autouse=True)
def no_leftover_copies():
    """Every before-copy a test's verifiers made is gone afterwards."""
    import glob
    import tempfile
    made: list[Verifier] = []
    VERIFIERS.append(made)
    yield
    VERIFIERS.pop()
    for v in made:
        v.close()
    mine = glob.glob(f"{tempfile.gettempdir()}/artoo-before-{os.getpid()}-*")
    assert mine == []


VERIFIERS: list[list] = []


def validator(settings, goal: str, *derivations, opinions=(), context: str = ""):
    """R4a on the bundled-model path (code decides) unless `opinions` are given (remote)."""
    st = subtask(goal, context)
    local = not opinions
    verifier = Verifier(st, FakeLLM(*derivations), settings)
    verifier.start()
    VERIFIERS[-1].append(verifier)
    return AgentValidator(st, FakeLLM(*opinions, local=local), settings, verifier=verifier)


def require_sandbox(settings, why: str) -> None:
    from services.safety import sandbox
    if sandbox.status(settings).mode != "bubblewrap":
        pytest.skip(why)


def result(records, output, status="completed", attempt=1):
    return ExecutionResult(task_id="run-law0", subtask_id="st-1", attempt=attempt,
                           status=status, output=output, tool_calls=list(records))


SUM = "awk -F, '$3==\"Norway\" {s+=$2} END {print s}' cities.csv"
# Second derivations, in the other form (k-of-N: "verified" needs both to agree)
SUM_PY = ("FILE: none\nPYTHON:\nimport csv\nprint(sum(int(r['population']) for r in "
          "csv.DictReader(open('cities.csv')) if r['country'] == 'Norway'))")
ERRORS_PY = ("FILE: errors.txt\nPYTHON:\nfor line in open('app.log'):\n"
             "    if line.split()[0] == 'ERROR':\n        print(line, end='')")
COUNT_ERRORS_PY = "FILE: none\nPYTHON:\nprint(sum(l.split()[0] == 'ERROR' for l in open('app.log')))"


NORWAY_SH = {"output_file": "", "command": "grep -w Norway cities.csv | cut -d, -f2 | "
                                          "paste -sd+ | bc"}


def test_agreement_with_the_independent_check_is_verified(settings, ws):
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   NORWAY_SH, SUM_PY)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and j.outcome.verified
    assert all(v.checked and v.verdict == "pass" for v in j.outcome.criteria_verdicts)
    assert j.outcome.answer == "985000"
    assert any("independent check" in c for c in j.outcome.checks)
    assert any(c.startswith("second independent check (program)") for c in j.outcome.checks), \
        j.outcome.checks


def test_a_second_check_in_another_form_must_agree_too(settings, ws):
    """k-of-N: one agreeing derivation is one model's opinion. A second one in the other form
    that disagrees, derives nothing, or cannot run (no sandbox for a program) leaves the result
    done but unverified, saying why; never a retry of an answer that may be right."""
    require_sandbox(settings, "the second check in another form is a program")
    goal = "Total population of the Norwegian cities in cities.csv?"
    wrong_py = SUM_PY.replace("'Norway'", "'France'")
    for second, why in ((wrong_py, "does not agree; it printed: 520000"),
                        ("FILE: none\nPYTHON:\nprint(open('nope.csv').read())", "failed")):
        av = validator(settings, goal, NORWAY_SH, second)
        j = av.judge(result([run(settings, SUM)], "985000"))
        assert j.kind == "matched" and not j.outcome.verified, j.outcome
        assert any("second independent check in another form" in u and why in u
                   for u in j.outcome.unverified), j.outcome.unverified
        assert j.outcome.answer == "985000"
    # a disagreeing second check is not outvoted by a third sample that agrees
    third = {"output_file": "", "command": "awk -F, '/Norway/ {s+=$2} END {print s}' cities.csv"}
    av = validator(settings, goal, NORWAY_SH, wrong_py, third)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
    unconfined = dataclasses.replace(settings, sandbox="off")
    av = validator(unconfined, goal, NORWAY_SH)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("needs the tool sandbox" in u for u in j.outcome.unverified)


def test_invented_value_is_caught(settings, ws):
    # the `date` shape: the answer's value comes from no tool output of this task
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   {"output_file": "", "command": SUM})
    j = av.judge(result([run(settings, "date")], "1000000"))
    assert j.kind == "retry" and "1000000" in j.correction.what_was_wrong
    j2 = av.judge(result([run(settings, "ls")], "1000000", attempt=2))
    assert j2.kind == "failed" and not j2.outcome.verified
    assert "no tool output" in j2.outcome.failure_reason


def test_a_computed_value_equal_to_a_literal_of_the_program_is_not_invented(settings, ws):
    """A program spells out only what it prints as a literal: the `2` of `f[2]` is an index,
    and the count of 2 it printed was computed (it was rejected as a value from nowhere, and
    the right answer lost). `print(2)` still proves nothing."""
    goal = "How many Norwegian cities are listed in cities.csv?"
    count = ("python3 -c 'n = 0\nfor line in open(\"cities.csv\").readlines()[1:]:\n"
             "    f = line.strip().split(\",\")\n    if f[2] == \"Norway\":\n        n += 1\n"
             "print(n)'")
    check = {"output_file": "", "command": "awk -F, '$3==\"Norway\"' cities.csv | wc -l"}
    av = validator(settings, goal, check, check)
    j = av.judge(result([run(settings, count)], "2"))
    assert j.kind == "matched", (j.kind, j.correction)
    assert not any("no tool output" in c for c in j.outcome.checks + j.outcome.unverified)
    av = validator(settings, goal, check)
    j = av.judge(result([run(settings, "python3 -c 'print(2)'")], "2"))
    assert j.kind == "retry" and "no tool output" in j.correction.what_was_wrong


def test_missing_file_is_caught(settings, ws):
    goal = "Copy every ERROR line of app.log into errors.txt"
    av = validator(settings, goal, {"output_file": "errors.txt",
                                    "command": "grep ERROR app.log > errors.txt"})
    j = av.judge(result([run(settings, "grep ERROR app.log")], "done"))
    assert j.kind == "retry" and "errors.txt does not exist" in j.correction.what_was_wrong
    # the lines were printed, not written: the correction names the write that was left out
    assert r"printed 'ERROR b\nERROR d' but wrote no file" in j.correction.what_was_wrong
    assert "open('errors.txt', 'w')" in j.correction.what_to_do


def test_wrong_content_is_caught_and_right_content_verified(settings, ws):
    goal = "Copy every ERROR line of app.log into errors.txt"
    derivation = {"output_file": "errors.txt", "command": "grep ERROR app.log > errors.txt"}
    av = validator(settings, goal, derivation)
    wrong = run(settings, "head -n 2 app.log > errors.txt && cat errors.txt")
    j = av.judge(result([wrong], "errors.txt written"))
    assert j.kind == "retry"
    assert "INFO a" in j.correction.what_was_wrong and "ERROR d" in j.correction.what_was_wrong
    (ws / "errors.txt").unlink()          # (an overwrite would need an approval)
    require_sandbox(settings, "the second check in another form is a program")
    av2 = validator(settings, goal, derivation, ERRORS_PY)
    right = run(settings, "awk '$1 == \"ERROR\"' app.log > errors.txt; cat errors.txt")
    j2 = av2.judge(result([right], "errors.txt written"))
    assert j2.kind == "matched" and j2.outcome.verified


def biggest_city_with_a_check_that_derives_nothing(settings):
    return validator(settings, "Save the name of the city with the most people in cities.csv to "
                     "biggest.txt", {"output_file": "biggest.txt",
                                     "command": "awk -F, '$2==max {print $1}' cities.csv"})


def test_an_empty_file_matching_an_empty_derivation_is_not_done(settings, ws):
    av = biggest_city_with_a_check_that_derives_nothing(settings)
    write_nothing = run(settings, "awk -F, '$3==top {print $1}' cities.csv > biggest.txt")
    j = av.judge(result([write_nothing], "biggest.txt written"))
    assert j.kind == "retry" and "biggest.txt is empty" in j.correction.what_was_wrong
    j2 = av.judge(result([write_nothing], "biggest.txt written", attempt=2))
    assert j2.kind == "failed" and not j2.outcome.verified
    assert "biggest.txt is empty" in j2.outcome.failure_reason


def test_a_file_with_content_is_not_rewritten_because_a_check_derived_nothing(settings, ws):
    av = biggest_city_with_a_check_that_derives_nothing(settings)
    wrote = run(settings, "echo Lagos > biggest.txt")
    j = av.judge(result([wrote], "biggest.txt written"))
    assert j.kind == "matched" and not j.outcome.verified          # no retry, no "verified"
    assert any("derived nothing to compare" in u for u in j.outcome.unverified)


BIGGEST_SQL = "FILE: biggest.txt\nSQL: SELECT city FROM cities ORDER BY population DESC LIMIT 1"
BIGGEST_PY = ("FILE: biggest.txt\nPYTHON:\nimport csv\nrows = list(csv.DictReader(open("
              "'cities.csv')))\nprint(max(rows, key=lambda r: int(r['population']))['city'])")


def test_a_check_in_the_other_form_stands_in_for_one_that_derived_nothing(settings, ws):
    # the awk check derives nothing; a query over cities.csv stands in, and contradicts a wrong
    # file (a retry naming what it derived) or, with a program agreeing, verifies a right one
    require_sandbox(settings, "the stand-in is a query run as a program in the sandbox")
    av = biggest_city_with_a_check_that_derives_nothing(settings)
    av.verifier.llm.replies.append(BIGGEST_SQL)
    j = av.judge(result([run(settings, "echo Lagos > biggest.txt")], "biggest.txt written"))
    assert j.kind == "retry" and "expects:\nOslo" in j.correction.what_was_wrong, j
    (settings.workspace / "biggest.txt").unlink()
    av = biggest_city_with_a_check_that_derives_nothing(settings)
    av.verifier.llm.replies += [BIGGEST_SQL, BIGGEST_PY]
    j = av.judge(result([run(settings, "echo Oslo > biggest.txt")], "biggest.txt written"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert any("stands in" in c for c in j.outcome.checks), j.outcome.checks


def test_agreement_with_the_executors_own_method_is_not_verified(settings, ws):
    """Two runs of the same method are one derivation: a small model repeats its own mistake
    (a word grepped anywhere in the line), so agreeing with it proves nothing."""
    goal = "Copy every ERROR line of app.log into errors.txt"
    av = validator(settings, goal, {"output_file": "errors.txt",
                                    "command": "cat app.log | grep -E 'ERROR'"})
    same = run(settings, "grep -w ERROR app.log > errors.txt; cat errors.txt")
    j = av.judge(result([same], "errors.txt written"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("executor's own method" in u for u in j.outcome.unverified)
    av = validator(settings, "How many ERROR lines are in app.log?",
                   {"output_file": "", "command": "grep -c ERROR app.log"})
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "2"))
    assert j.kind == "matched" and not j.outcome.verified


def test_own_method_agreement_contradicted_by_the_one_independent_check_is_not_done(settings, ws):
    """The check repeated the executor's method (no evidence) and the one independent check,
    in the other form, derived another result: contradicted, so a failed attempt (the last one
    fails the subtask) — not "done, but not verified". Confirmed instead, it is verified."""
    require_sandbox(settings, "the second check in another form is a program")
    goal = "How many ERROR lines are in app.log?"
    own = "grep -c ERROR app.log"
    other = "FILE: none\nPYTHON:\nprint(sum(1 for l in open('app.log') if 'INFO' in l) + 1)"
    av = validator(settings, goal, {"output_file": "", "command": own}, *[other] * 4)
    j = av.judge(result([run(settings, own)], "2"))
    assert j.kind == "retry" and "does not agree with an independent check" in \
        j.correction.what_was_wrong, j
    j = av.judge(result([run(settings, own)], "2", attempt=2))
    assert j.kind == "failed" and not j.outcome.verified
    av = validator(settings, goal, {"output_file": "", "command": own}, COUNT_ERRORS_PY)
    j = av.judge(result([run(settings, own)], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome


def test_a_check_that_cannot_run_gives_way_to_one_in_the_other_form(settings, ws):
    """A checking program that crashes is no check: one in the other form stands in for it."""
    require_sandbox(settings, "the first check is a program")
    goal = "How many ERROR lines are in app.log?"
    broken = "FILE: none\nPYTHON:\nprint(undefined_name)"
    av = validator(settings, goal, broken, {"output_file": "", "command": "grep -c ERROR app.log"})
    j = av.judge(result([run(settings, "awk '/ERROR/ {n++} END {print n}' app.log")], "2"))
    assert j.kind == "matched", j
    assert any("grep -c ERROR app.log" in c for c in j.outcome.checks), j.outcome.checks
    # the second check in the other form crashes: it is asked once more, and then confirms
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   broken, COUNT_ERRORS_PY)
    j = av.judge(result([run(settings, "awk '/ERROR/ {n++} END {print n}' app.log")], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome


def test_a_check_command_the_gate_cannot_classify_runs_confined(settings, ws):
    """A shell loop that only prints is no read-only command to the gate; it runs in the
    sandbox on a scratch copy, and its output is a derivation like any other."""
    require_sandbox(settings, "an unclassified check runs in the sandbox")
    goal = "Write the squares of 1 to 4 into squares.txt, one per line"
    loop = "for i in 1 2 3 4; do echo $((i*i)); done"
    av = validator(settings, goal, {"output_file": "squares.txt", "command": loop},
                   "FILE: squares.txt\nPYTHON:\nprint('\\n'.join(str(i * i) for i in range(1, 5)))")
    rec = run(settings, "python3 -c 'print(*[i*i for i in range(1, 5)], sep=chr(10))' "
                        "> squares.txt")
    j = av.judge(result([rec], "done"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    av = validator(settings, goal, {"output_file": "squares.txt", "command": loop})
    (settings.workspace / "squares.txt").write_text("1\n4\n9\n15\n")
    j = av.judge(result([run(settings, "echo 15 >> squares.txt")], "done"))
    assert j.kind == "retry" and "expects" in j.correction.what_was_wrong


def test_changed_input_file_is_reported_not_verified(settings, ws):
    goal = "Copy every ERROR line of app.log into errors.txt"
    av = validator(settings, goal, {"output_file": "errors.txt",
                                    "command": "grep ERROR app.log"})
    rec = run(settings, "grep ERROR app.log > errors.txt; echo x >> cities.csv; cat errors.txt")
    j = av.judge(result([rec], "done"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("cities.csv" in u for u in j.outcome.unverified)
    assert (ws / "cities.csv").read_text().endswith("x\n")     # a change goal's work stays


def test_an_input_a_questions_work_damaged_is_put_back_and_reported(settings, ws):
    """A program that opened the CSV it was asked about for writing emptied it: the goal only
    asks, so the file comes back from the copy taken before the work (a planted link is
    replaced, not followed), and the outcome still says the work changed it. A request put as a
    question keeps its change."""
    original = (ws / "cities.csv").read_text()
    outside = settings.workspace.parent / "outside.txt"
    outside.write_text("keep\n")
    goal = "Which city in cities.csv has the largest population?"
    check = {"output_file": "", "command": "sort -t, -k2 -n -r cities.csv | head -1 | cut -d, -f1"}
    av = validator(settings, goal, check, check)
    rec = run(settings, "python3 -c \"import csv; rows = list(csv.DictReader(open('cities.csv'))); "
                        "open('cities.csv', 'w'); print(max(rows, key=lambda r: "
                        "int(r['population']))['city']); import os; os.remove('app.log'); "
                        f"os.symlink('{outside}', 'app.log')\"")
    assert rec.output.strip() == "Oslo" and (ws / "cities.csv").read_text() == ""
    j = av.judge(result([rec], "Oslo"))
    assert (ws / "cities.csv").read_text() == original
    assert not (ws / "app.log").is_symlink() and (ws / "app.log").read_text().startswith("INFO a")
    assert outside.read_text() == "keep\n"
    assert j.kind == "matched" and not j.outcome.verified and j.outcome.answer == "Oslo"
    assert any("put back" in c and "cities.csv" in c for c in j.outcome.checks), j.outcome.checks
    assert any("cities.csv" in u for u in j.outcome.unverified)
    av = validator(settings, "Can you sort cities.csv by population?", check)
    change = "python3 -c \"open('cities.csv', 'w').write('changed\\n')\""
    run(settings, change)
    j = av.judge(result([], "Sorted cities.csv"))     # a retry: the failed attempt is undone
    assert j.kind == "retry" and (ws / "cities.csv").read_text() == original
    run(settings, change)
    j = av.judge(result([], "Sorted cities.csv", attempt=2))      # the last attempt's stays
    assert j.kind == "failed" and (ws / "cities.csv").read_text() == "changed\n"


def test_disagreement_is_a_correction_then_a_failed_attempt(settings, ws):
    goal = "How many ERROR lines are in app.log?"
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   COUNT_ERRORS_PY)
    j = av.judge(result([run(settings, "grep -c INFO app.log")], "2"))   # same value, wrong why
    assert j.kind == "matched" and j.outcome.verified                    # values agree
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"})
    j = av.judge(result([run(settings, "wc -l < app.log")], "4"))
    assert j.kind == "retry"
    # both outputs shown; the check's command is not (a method to copy, never evidence)
    assert j.correction.what_was_wrong == ("your answer '4' does not agree with an independent "
                                           "check: a shell command printed: 2")
    j2 = av.judge(result([run(settings, "wc -l < app.log")], "4", attempt=2))
    # contradicted, not "could not be confirmed": not done, and both outputs are in the reason
    assert j2.kind == "failed" and not j2.outcome.verified and not j2.outcome.not_possible
    assert "4" in j2.outcome.failure_reason and "grep -c ERROR app.log" in \
        j2.outcome.failure_reason                     # the user's report names the check


def test_a_correction_names_a_checks_command_by_its_form_only():
    from services.roles.law0report import conceal_checks
    text = ("an independent check (`python3 -c 'import os\nfor f in os.listdir(\"r\")'`) "
            "printed: 3; a second check (`SQL SELECT COUNT(*) FROM t`) printed: 3; your "
            "command (`grep -c ERROR app.log`) printed 4; the item `- [ ]`; "
            "`find . -name '*.log' | wc -l` printed 2")
    assert conceal_checks(text, ["grep -c ERROR app.log"]) == (
        "an independent check (a program) printed: 3; a second check (`SQL SELECT COUNT(*) "
        "FROM t`) printed: 3; your command (`grep -c ERROR app.log`) printed 4; the item "
        "`- [ ]`; a shell command printed 2")


def test_agreeing_only_after_seeing_the_check_is_not_verified(settings, ws):
    goal = "How many ERROR lines are in app.log?"
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"})
    assert av.judge(result([run(settings, "wc -l < app.log")], "4")).kind == "retry"
    copied = av.judge(result([], "2", attempt=2))                         # copied, no command
    assert copied.kind == "matched" and not copied.outcome.verified
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   COUNT_ERRORS_PY)
    assert av.judge(result([run(settings, "wc -l < app.log")], "4")).kind == "retry"
    own = av.judge(result([run(settings, "awk '/ERROR/ {n++} END {print n}' app.log")], "2",
                          attempt=2))
    assert own.kind == "matched" and own.outcome.verified                 # its own derivation
    # the shown check's own command run again inside another one is no derivation of its own:
    # copied, so the check in the other form decides, and it contradicts (it was "done")
    other = "FILE: none\nPYTHON:\nprint(len(open('app.log').read().split('ERROR')))"
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   other)
    assert av.judge(result([run(settings, "wc -l < app.log")], "4")).kind == "retry"
    rerun = av.judge(result([run(settings, "find app.log -exec grep -c ERROR app.log \\;")],
                            "2", attempt=2))
    assert rerun.kind == "failed", rerun.outcome


def test_impossible_goal_ends_not_possible(settings, ws):
    goal = "What is the population of Paris according to cities.csv?"
    derivation = {"output_file": "", "command": "awk -F, '$1==\"Paris\" {print $2}' cities.csv"}
    av = validator(settings, goal, derivation)
    j = av.judge(result([run(settings, "grep -w Paris cities.csv")],
                        "Paris is not in cities.csv", status="not_possible"))
    assert j.kind == "failed" and j.outcome.not_possible and j.outcome.verified
    assert "not possible" in j.outcome.failure_reason
    # a near match is not an answer: the independent check found nothing
    av = validator(settings, "What is the population of Lyons according to cities.csv?",
                   {"output_file": "", "command": "awk -F, '$1==\"Lyons\" {print $2}' cities.csv"})
    j = av.judge(result([run(settings, "grep -i lyon cities.csv")], "520000"))
    assert j.kind == "retry" and "not_possible" in j.correction.what_to_do


def test_unusable_check_leaves_the_result_unverified(settings, ws):
    goal = "How many ERROR lines are in app.log?"
    av = validator(settings, goal, {"output_file": "", "command": "rm app.log"})
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "2"))
    assert j.kind == "matched" and not j.outcome.verified
    # a check that is not read-only runs confined on a scratch copy; one that changed the
    # inputs of a question derived nothing, and the real file is untouched
    assert any("changed files it was to read" in u for u in j.outcome.unverified)
    assert (settings.workspace / "app.log").exists()


def test_self_contradicting_verdict_is_not_met(settings, ws):
    goal = "How many ERROR lines are in app.log?"
    contradicting = {"criteria": [{"criterion": "the goal is achieved", "met": True,
                                   "evidence": "2"}], "verdict": "matched",
                     "what_was_wrong": "the output does not answer the question"}
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   opinions=[contradicting])
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "2"))
    assert j.kind == "retry"
    assert j.outcome is None
    no_value = {"criteria": [{"criterion": "the goal is achieved", "met": True,
                              "evidence": "the count is correct"}], "verdict": "matched"}
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   opinions=[no_value])
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "2"))
    assert j.kind == "retry" and "none of the claimed values" in j.correction.what_was_wrong \
        or j.kind == "retry"


def test_absence_needs_a_check_that_looked_for_the_missing_thing(settings, ws):
    # everything the goal names exists: "not possible" is wrong
    goal = "What is the population of Oslo in cities.csv?"
    av = validator(settings, goal, {"output_file": "", "command": "awk -F, '$9==1' cities.csv"})
    j = av.judge(result([run(settings, "grep -w oslo cities.csv")], "no such city",
                        status="not_possible"))
    assert j.kind == "retry" and "exists in the workspace" in j.correction.what_was_wrong
    # a check that printed nothing without looking for the missing name proves nothing
    goal = "What is the population of Paris according to cities.csv?"
    av = validator(settings, goal, {"output_file": "", "command": "awk -F, '$9==1' cities.csv"})
    j = av.judge(result([run(settings, "grep -w Paris cities.csv")], "Paris is not listed",
                        status="not_possible"))
    # "nothing found" is a result only when confirmed: unconfirmed, the attempt failed
    assert j.kind == "retry" and "no independent check confirmed" in j.correction.what_was_wrong
    j = av.judge(result([run(settings, "grep -w Paris cities.csv")], "Paris is not listed",
                        status="not_possible", attempt=2))
    assert j.kind == "failed" and not j.outcome.verified and not j.outcome.not_possible
    # a goal word the check used as a path ("find notes/ talks"): its "No such file" is no
    # evidence of absence — only a file or folder the goal names, and the workspace lacks, is
    (settings.workspace / "notes").mkdir()
    (settings.workspace / "notes" / "kickoff.md").write_text("Project Falcon starts in May.\n")
    goal = "Which of the files under notes/ talks about project falcon?"
    av = validator(settings, goal, {"output_file": "",
                                    "command": "find notes/ talks -type f | grep 'project falcon'"})
    j = av.judge(result([run(settings, "find notes/ -name '*falcon*'")], "nothing found",
                        status="not_possible"))
    assert j.kind == "retry" and "no independent check confirmed" in j.correction.what_was_wrong
    # a missing file named by the goal: the check's "No such file" is the evidence
    goal = "How many lines are in report_2023.txt?"
    av = validator(settings, goal, {"output_file": "", "command": "wc -l < report_2023.txt"})
    j = av.judge(result([run(settings, "ls")], "report_2023.txt does not exist",
                        status="not_possible"))
    assert j.kind == "failed" and j.outcome.not_possible and j.outcome.verified


def test_one_operation_under_another_spelling_is_the_same_method(settings, ws):
    """`awk '/P/'` selects the lines containing P anywhere, as `grep P` does: agreeing with it is
    not an independent check."""
    goal = "Copy every ERROR line of app.log into errors.txt"
    av = validator(settings, goal, {"output_file": "errors.txt", "command": "awk '/ERROR/' app.log"})
    j = av.judge(result([run(settings, "grep ERROR app.log > errors.txt; cat errors.txt")],
                        "errors.txt written"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("executor's own method" in u for u in j.outcome.unverified)


def test_both_splitting_a_quoted_csv_on_commas_is_not_verified(settings, ws):
    """Two different tools that both split a CSV with quoted commas on every comma share the
    same blind spot (the quoted rows' fields shift): their agreement is not evidence."""
    (settings.workspace / "sales.csv").write_text(
        'id,customer,amount\n1,"Acme, Inc.",10\n2,Bob,5\n')
    goal = "What is the total of the amount column in sales.csv?"
    av = validator(settings, goal, {"output_file": "",
                                    "command": "cut -d, -f3 sales.csv | grep -xE '[0-9]+' | paste -sd+ | bc"})
    naive = run(settings, "awk -F, 'NR>1 {s+=$3} END {print s}' sales.csv")
    assert naive.output.strip() == "5"          # the quoted row's amount was lost
    j = av.judge(result([naive], "5"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("quoted fields" in u for u in j.outcome.unverified)


def test_a_folder_named_as_the_output_file_is_not_a_missing_file(settings, ws):
    # the checker answered FILE: <the folder the goal counts in>; a folder is never the file to
    # write, so the question is checked as a question instead of failing as "does not exist"
    (ws / "logs").mkdir()
    for name in ("a.log", "b.log", "c.txt"):
        (ws / "logs" / name).write_text("x\n")
    count = "find logs -type f -name '*.log' | wc -l"
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, "How many .log files are in logs?",
                   {"output_file": "logs", "command": "ls logs | grep -c '[.]log$'"},
                   "FILE: none\nPYTHON:\nimport os\n"
                   "print(sum(n.endswith('.log') for n in os.listdir('logs')))")
    j = av.judge(result([run(settings, count)], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome.failure_reason
    assert "does not exist" not in (j.outcome.failure_reason or "")


def test_an_input_file_named_as_the_output_of_a_question_is_not_rewritten(settings, ws):
    # the checker answered FILE: <the log the question reads>; code must not turn a question into
    # "rewrite app.log" (a correction that had the executor edit its input with sed -i)
    require_sandbox(settings, "the second check in another form is a program")
    before = (ws / "app.log").read_text()
    av = validator(settings, "How many entries in app.log have the level ERROR?",
                   {"output_file": "app.log", "command": "awk '$1==\"ERROR\"' app.log | wc -l"},
                   COUNT_ERRORS_PY)
    j = av.judge(result([run(settings, "grep -c '^ERROR' app.log")], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome.failure_reason
    assert (ws / "app.log").read_text() == before
    assert not any("rewrite" in c for c in j.outcome.checks)


def test_a_stray_number_after_writing_the_asked_file_does_not_fail_the_work(settings, ws):
    # the executor wrote the file with a command that prints nothing, then "answered" a number;
    # the deliverable is the file, which an independent check confirms
    goal = "Copy every ERROR line of app.log into errors.txt"
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, goal, {"output_file": "errors.txt",
                                    "command": "grep ERROR app.log"}, ERRORS_PY)
    wrote = run(settings, "awk '$1 == \"ERROR\"' app.log > errors.txt")
    j = av.judge(result([wrote], "359"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome.failure_reason
    assert "359" not in (j.outcome.answer or "")


def test_a_data_file_goal_is_checked_by_a_program_on_a_scratch_copy(settings, ws):
    require_sandbox(settings, "a checking program runs only read-only in the sandbox")
    # told to print a file's content, the small model writes the file: it runs on a scratch
    # copy, and what it wrote there is its derivation; nothing else is touched
    goal = "Write the Norwegian cities of cities.csv, one per line, to norway.txt"
    program = ("FILE: norway.txt\nPYTHON:\n```python\nimport csv\n"
               "with open('norway.txt', 'w') as out:\n"
               "    for r in csv.DictReader(open('cities.csv')):\n"
               "        if r['country'] == 'Norway':\n            out.write(r['city'] + '\\n')\n"
               "open('cities.csv', 'w').close()\n```")
    av = validator(settings, goal, program,
                   {"output_file": "norway.txt", "command": "grep ',Norway$' cities.csv | cut -d, -f1"})
    wrote = run(settings, "awk -F, '$3==\"Norway\" {print $1}' cities.csv > norway.txt")
    j = av.judge(result([wrote], "done"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert (settings.workspace / "cities.csv").read_text().startswith("city,")
    assert av.verifier.derived.output.split() == ["Oslo", "Bergen"]
    goal = "Total population of the Norwegian cities in cities.csv?"
    # a program that reads records by field agrees: verified; bare final expression printed
    program = ("FILE: none\nPYTHON:\nrows = csv.DictReader(open('cities.csv'))\n"
               "sum(int(r['population']) for r in rows if r['country'] == 'Norway')")
    av = validator(settings, goal, program, NORWAY_SH)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and j.outcome.verified
    assert any("python3 -c" in c for c in j.outcome.checks)
    # its KeyError on a column the goal names and the data lacks: evidence of absence
    program = ("FILE: none\nPYTHON:\nimport csv\nfor r in csv.DictReader(open('cities.csv')):\n"
               "    print(r['altitude'])")
    av = validator(settings, "What is the average altitude in cities.csv?", program)
    j = av.judge(result([run(settings, "head -1 cities.csv")], "there is no altitude column",
                        status="not_possible"))
    assert j.kind == "failed" and j.outcome.not_possible and j.outcome.verified


def test_work_on_a_near_match_of_a_missing_name_is_not_done(settings, ws):
    # the goal names a column the data lacks; executor and check both read a longer name that
    # contains it, and agree: the answer is to another question (the impossible-goal shape)
    from services.roles.programs import python_command
    (settings.workspace / "towns.csv").write_text("town,ratings_count\nA,10\nB,30\n")
    mean = python_command("import csv\nr = [int(x['ratings_count']) for x in "
                          "csv.DictReader(open('towns.csv'))]\nprint(sum(r) / len(r))")
    av = validator(settings, "What is the average rating of the towns in towns.csv?",
                   {"output_file": "", "command": "awk -F, 'NR>1 {t+=$2; c++} END {print t/c}' "
                                                  "towns.csv"})
    j = av.judge(result([run(settings, mean)], "20.0"))
    assert j.kind == "retry" and not j.outcome
    assert "'rating', which the workspace lacks, and the work read 'ratings_count'" in \
        j.correction.what_was_wrong


def test_the_same_program_twice_is_verified_only_on_data_it_cannot_misread(settings, ws):
    # executor and checker write one program (same fields, same looked-for value). On clean data
    # their agreement is evidence; where the field holds the value in another spelling it is not:
    # both may have dropped 'Shipped' the same way.
    from services.roles.programs import python_command
    require_sandbox(settings, "a checking program runs only in the sandbox")
    count = ("import csv\nn = 0\nfor row in csv.DictReader(open('orders.csv')):\n"
             "    if row['status'] == 'shipped':\n        n += 1\nprint(n)")
    check = ("FILE: none\nPYTHON:\nimport csv\nrows = list(csv.DictReader(open('orders.csv')))\n"
             "print(len([r for r in rows if r['status'] == 'shipped']))")
    goal = "How many orders in orders.csv have status shipped?"
    for data, verified in (("id,status\n1,shipped\n2,pending\n3,shipped\n", True),
                           ("id,status\n1,shipped\n2,Shipped\n3,shipped\n", False)):
        (settings.workspace / "orders.csv").write_text(data)
        av = validator(settings, goal, check,
                       {"output_file": "", "command": "grep -c ',shipped$' orders.csv"})
        j = av.judge(result([run(settings, python_command(count))], "2"))
        assert j.kind == "matched" and j.outcome.verified is verified, j.outcome
    assert any("read the same fields the same way (shipped, status)" in u and "'Shipped'" in u
               for u in j.outcome.unverified), j.outcome.unverified


def test_the_same_program_twice_is_not_verified_where_records_group(settings, ws):
    # the largest single payment and the customer who paid most in total are two answers; two
    # programs reading the same two fields pick the same one, so their agreement is no evidence
    from services.roles.programs import python_command
    require_sandbox(settings, "a checking program runs only in the sandbox")
    (settings.workspace / "pay.csv").write_text("customer,amount\nann,5\nbob,9\nann,6\n")
    top = ("import csv\nrows = list(csv.DictReader(open('pay.csv')))\n"
           "print(max(rows, key=lambda r: float(r['amount']))['customer'])")
    av = validator(settings, "Which customer paid the most, according to pay.csv?",
                   "FILE: none\nPYTHON:\n" + top.replace("rows", "records"))
    j = av.judge(result([run(settings, python_command(top))], "bob"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("customer repeats (3 records, 2 different values)" in u
               for u in j.outcome.unverified), j.outcome.unverified


def test_agreement_counts_where_the_check_itself_handles_the_datas_pitfall(settings, ws):
    # the same reading twice on misleading data is no evidence, unless the check visibly takes
    # care of what could mislead it: it compares the field case-folded and trimmed, or it groups
    # the records per key; a check that does not stays doubted
    from services.roles.programs import python_command
    require_sandbox(settings, "a checking program runs only in the sandbox")
    (settings.workspace / "orders.csv").write_text("id,status\n1,shipped\n2,Shipped \n3,x\n")
    count = ("import csv\nprint(sum(r['status'].strip().lower() == 'shipped' for r in "
             "csv.DictReader(open('orders.csv'))))")
    for query, verified in (("LOWER(TRIM(status)) = 'shipped'", True),
                            ("LOWER(status) = 'shipped'", False)):
        av = validator(settings, "How many orders in orders.csv have status shipped?",
                       "FILE: none\nPYTHON:\n" + count.replace("r[", "row[").replace(" r ", " row "),
                       f"FILE: none\nSQL: SELECT COUNT(*) FROM orders WHERE {query}")
        j = av.judge(result([run(settings, python_command(count))], "2"))
        assert j.kind == "matched" and j.outcome.verified is verified, (query, j.outcome)
    (settings.workspace / "pay.csv").write_text("customer,amount\nann,5\nbob,9\nann,6\n")
    total = ("import csv\nt = {}\nfor r in csv.DictReader(open('pay.csv')):\n"
             "    t[r['customer']] = t.get(r['customer'], 0) + float(r['amount'])\n"
             "print(max(t, key=t.get))")
    av = validator(settings, "Which customer paid the most in total, according to pay.csv?",
                   "FILE: none\nPYTHON:\nimport csv\nsums = {}\nfor row in csv.DictReader("
                   "open('pay.csv')):\n    sums[row['customer']] = sums.get(row['customer'], 0)"
                   " + float(row['amount'])\nprint(max(sums, key=sums.get))",
                   "FILE: none\nSQL: SELECT customer FROM pay GROUP BY customer "
                   "ORDER BY SUM(amount) DESC LIMIT 1")
    j = av.judge(result([run(settings, python_command(total))], "ann"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome


def test_a_change_goal_whose_workspace_did_not_change_is_not_done(settings, ws):
    # the executor listed the lines to delete instead of deleting them; a check that lists the
    # same lines agrees with the listing, but nothing was done
    goal = "Delete every line of app.log that has the level INFO"
    av = validator(settings, goal, {"output_file": "", "command": "grep INFO app.log"})
    j = av.judge(result([run(settings, "grep -n INFO app.log")], "1:INFO a 3:INFO c"))
    assert j.kind == "retry" and "nothing in the workspace changed" in \
        j.correction.what_was_wrong
    assert (ws / "app.log").read_text().count("INFO") == 2


def test_a_file_matching_the_check_only_without_line_end_spaces_is_not_verified(settings, ws):
    goal = "Copy every ERROR line of app.log into errors.txt"
    av = validator(settings, goal, {"output_file": "errors.txt", "command": "grep ERROR app.log"})
    wrote = run(settings, "sed -n 's/^ERROR.*/& /p' app.log > errors.txt")
    j = av.judge(result([wrote], "errors.txt written"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("spaces at the ends of lines" in u for u in j.outcome.unverified)


def test_the_answer_to_a_goal_that_changed_files_says_what_changed(settings, ws):
    # the executor's closing words were only the tool's output; the answer names the effect
    goal = "Make a copy of app.log called app.bak"
    av = validator(settings, goal, {"output_file": "", "command": "cp app.log app.bak"})
    cp = run(settings, "cp app.log app.bak")
    j = av.judge(result([cp], cp.output))
    assert j.kind == "matched" and not j.outcome.verified      # the check was not read-only
    assert j.outcome.answer == "done: created: app.bak", j.outcome


def test_a_questions_printed_value_stays_the_answer_after_a_stray_file(settings, ws):
    # the first attempt wrote a file nobody asked for; the value the command printed is the
    # answer to the question, not "done: created: …"
    (ws / "people.txt").write_text("ann\nbob\nann\ncy\n")
    goal = "How many different names are in people.txt?"
    av = validator(settings, goal, {"output_file": "", "command": "sort -u people.txt | wc -l"})
    stray = run(settings, "sort -u people.txt > names.txt")
    count = run(settings, "sort -u people.txt | wc -l")
    j = av.judge(result([stray, count], count.output))
    assert j.outcome is not None and j.outcome.answer.strip() == "3", j.outcome


def test_a_record_count_that_includes_the_header_line_is_not_verified(settings, ws):
    # `wc -l` and `len(readlines())` are two methods that agree on the same off-by-one
    av = validator(settings, "How many cities are listed in cities.csv?",
                   {"output_file": "", "command": "cat cities.csv | wc -l"})
    j = av.judge(result([run(settings, "grep -c , cities.csv")], "4"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("cities.csv with its header line" in u for u in j.outcome.unverified)


def test_a_shell_command_looking_for_the_same_value_is_the_same_reading(settings, ws):
    # awk's exact match and the program's exact match miss 'Shipped' alike: agreement of the two
    # is no evidence on data that spells the value two ways
    require_sandbox(settings, "a checking program runs only in the sandbox")
    (settings.workspace / "orders.csv").write_text("id,status\n1,shipped\n2,Shipped\n3,shipped\n")
    check = ("FILE: none\nPYTHON:\nimport csv\nrows = list(csv.DictReader(open('orders.csv')))\n"
             "print(len([r for r in rows if r['status'] == 'shipped']))")
    av = validator(settings, "How many orders in orders.csv have status shipped?", check)
    j = av.judge(result([run(settings, "awk -F, '$2==\"shipped\"' orders.csv | wc -l")], "2"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("'Shipped'" in u for u in j.outcome.unverified), j.outcome.unverified


def test_two_flat_listings_of_a_workspace_with_subfolders_are_not_verified(settings, ws):
    # `ls` and os.listdir agree on the top folder; the goal may mean its subfolders too
    (ws / "src").mkdir()
    (ws / "src" / "b.log").write_text("x\n")
    goal = "How many .log files are there?"
    av = validator(settings, goal, {"output_file": "", "command": "ls *.log | wc -l"})
    lister = "python3 -c 'import os; print(sum(n.endswith(\".log\") for n in os.listdir(\".\")))'"
    j = av.judge(result([run(settings, lister)], "1"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("without looking inside subfolders" in u for u in j.outcome.unverified)
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, goal, {"output_file": "", "command": "find . -name '*.log' | wc -l"},
                   "FILE: none\nPYTHON:\nimport os\nprint(sum(f.endswith('.log') "
                   "for _, _, fs in os.walk('.') for f in fs))")
    j = av.judge(result([run(settings, "ls -R | grep -c '[.]log$'")], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome


def test_a_change_goal_is_checked_against_a_copy_the_check_changed(settings, ws):
    # no one file to check: the check's own (destructive) command runs on a scratch copy in the
    # sandbox, and the workspace must end up exactly like that copy
    require_sandbox(settings, "a check that changes files runs only in the sandbox, on a copy")
    for name in ("a.tmp", "b.tmp"):
        (ws / name).write_text("")
    (ws / "c.tmp").write_text("keep")
    goal = "Delete every empty .tmp file"
    check = {"output_file": "", "command": "find . -name '*.tmp' -empty -delete"}
    av = validator(settings, goal, check)
    one = run(settings, "rm a.tmp")          # (the test's toolbox has no operator: rm is refused)
    os.remove(ws / "a.tmp")
    j = av.judge(result([one], "deleted a.tmp"))
    assert j.kind == "retry" and "missing" not in j.correction.what_was_wrong
    assert "there but should not be: b.tmp" in j.correction.what_was_wrong
    assert (ws / "b.tmp").exists() and (ws / "c.tmp").read_text() == "keep"
    assert (ws / "a.tmp").exists()            # the failed attempt is undone before the retry
    os.remove(ws / "a.tmp")
    av = validator(settings, goal, check,     # a fresh subtask: its before-copy has b.tmp only
                   "FILE: none\nPYTHON:\nimport os\nfor f in os.listdir('.'):\n"
                   "    if f.endswith('.tmp') and os.path.getsize(f) == 0:\n        os.remove(f)")
    os.remove(ws / "b.tmp")
    j = av.judge(result([run(settings, "python3 -c 'print(1)'")], "deleted b.tmp"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert any("on a copy of the workspace: deleted: b.tmp" in c for c in j.outcome.checks)


def test_a_check_contradicted_by_one_in_the_other_form_is_a_tie_not_a_failure(settings, ws):
    """The first check renames chapter1.txt to chapter1..md on its copy (dev rename-txt-to-md:
    the retry it forced ended abandoned with the files right). One in the other form makes
    exactly what the work made: a tie — done, but not verified, both named; never verified.
    A second check that errs as well leaves the attempt failed, as before."""
    require_sandbox(settings, "a check that changes files runs only in the sandbox, on a copy")
    (ws / "drafts").mkdir()
    for name in ("chapter1.txt", "intro.txt", "notes.txt.bak"):
        (ws / "drafts" / name).write_text(name)
    goal = "In the drafts folder, change the extension of every .txt file to .md"
    slip = ("FILE: none\nPYTHON:\nimport os\nfor f in os.listdir('drafts'):\n"
            "    if f.endswith('.txt'):\n        os.rename('drafts/' + f, 'drafts/' + f[:-3] + "
            "'.md')")
    right = {"output_file": "", "command": "cd drafts && for f in *.txt; do mv \"$f\" "
                                           "\"${f%.txt}.md\"; done"}
    work = "cd drafts && mv chapter1.txt chapter1.md && mv intro.txt intro.md"
    av = validator(settings, goal, slip, right)
    j = av.judge(result([run(settings, work)], "renamed"))
    assert j.kind == "matched" and not j.outcome.verified, j
    assert any("two independent checks disagree" in u and "chapter1..md" in u
               for u in j.outcome.unverified), j.outcome.unverified
    assert sorted(os.listdir(ws / "drafts")) == ["chapter1.md", "intro.md", "notes.txt.bak"]
    # the second check errs too (it renames notes.txt.bak as well): failed, a retry
    for name in ("chapter1.md", "intro.md"):
        os.rename(ws / "drafts" / name, ws / "drafts" / name.replace(".md", ".txt"))
    wrong = {"output_file": "", "command": "cd drafts && for f in *.txt*; do mv \"$f\" "
                                           "\"${f%%.txt*}.md\"; done"}
    av = validator(settings, goal, slip, wrong)
    j = av.judge(result([run(settings, work)], "renamed"))
    assert j.kind == "retry" and "chapter1..md" in j.correction.what_was_wrong, j


# The other form on tabular data: an SQL query over tables code loaded (services/roles/sqlcheck.py)
NORWAY_SQL = "FILE: none\nSQL: SELECT SUM(population) FROM cities WHERE country = 'Norway';"


def test_the_second_check_on_tabular_data_is_a_query_over_the_loaded_tables(settings, ws):
    """Where the other form would be a shell one-liner on a CSV (which the small model splits
    on quoted commas, header and all), the checker states the logic as SQL and code reads the
    file: the query's rows confirm the result, and reports show the query, not its loader."""
    require_sandbox(settings, "a query runs as a program in the sandbox")
    llm_av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                       SUM_PY, NORWAY_SQL)
    j = llm_av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    second = [c for c in j.outcome.checks if c.startswith("second independent check (query)")]
    assert second == ["second independent check (query) `SQL SELECT SUM(population) FROM "
                      "cities WHERE country = 'Norway'` printed: 985000"], j.outcome.checks
    prompt = llm_av.verifier.llm.prompts[1]
    assert "cities (cities.csv, 3 rows): city TEXT, population INTEGER, country TEXT" in prompt
    assert "Workspace files" not in prompt
    # a query that derives something else leaves it unverified, and says what it printed
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   SUM_PY, NORWAY_SQL.replace("Norway", "France"))
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and not j.outcome.verified
    assert any("(`SQL SELECT SUM(population) FROM cities WHERE country = 'France'`) does not "
               "agree; it printed: 520000" in u for u in j.outcome.unverified), j.outcome


def test_a_second_check_that_names_no_file_derives_the_file_the_first_check_named(
        settings, ws):
    """A query that prints the count the goal asks to write down, its reply naming no file, is
    a derivation of that file (the first check named it), not a change goal's check that
    changed nothing on its copy: it confirms the right file and contradicts a wrong one."""
    require_sandbox(settings, "a query runs as a program in the sandbox")
    goal = "Work out the total population of the Norwegian cities in cities.csv and put " \
           "just that number in norway.txt"
    first = "FILE: norway.txt\n" + SUM_PY.split("\n", 1)[1]
    for written, verified in (("985000", True), ("1505000", False)):
        (settings.workspace / "norway.txt").unlink(missing_ok=True)
        av = validator(settings, goal, first, NORWAY_SQL)
        j = av.judge(result([run(settings, f"echo {written} > norway.txt")], "done"))
        if verified:
            assert j.kind == "matched" and j.outcome.verified, j.outcome
            assert "second independent check (query) `SQL SELECT SUM(population) FROM cities " \
                   "WHERE country = 'Norway'` printed: 985000" in j.outcome.checks
        else:   # the first check's program already disagrees: a correction
            assert j.kind == "retry" and "985000" in j.correction.what_was_wrong, j


def test_a_statement_that_adds_the_row_confirms_a_changed_table(settings, ws):
    """dev append-user-row (right, unverified in three runs): the query form's reply to "add a
    row to members.csv" is an INSERT, which used to be no check at all, so no change of a table
    could be verified. Run on the file's table, the table afterwards is the derivation: it
    confirms the right append and contradicts a wrong one."""
    require_sandbox(settings, "a query runs as a program in the sandbox")
    members = settings.workspace / "members.csv"
    goal = "Add a row for a new user to the end of members.csv: username carol, email " \
           "carol@x.io, role editor."
    first = ("FILE: members.csv\nPYTHON:\nprint(open('members.csv').read(), end='')\n"
             "print('carol,carol@x.io,editor')")
    insert = ("FILE: members.csv\nSQL: INSERT INTO members (username, email, role) VALUES "
              "('carol', 'carol@x.io', 'editor')")
    for role, verified in (("editor", True), ("viewer", False)):
        members.write_text("username,email,role\nanna,anna@x.io,admin\nbo,bo@x.io,viewer\n")
        av = validator(settings, goal, first, insert)
        j = av.judge(result([run(settings, f"echo carol,carol@x.io,{role} >> members.csv")],
                            "done"))
        if verified:
            assert j.kind == "matched" and j.outcome.verified, j.outcome
            assert any(c.startswith("second independent check (query) `SQL INSERT INTO members")
                       for c in j.outcome.checks), j.outcome.checks
        else:   # the first check's content already disagrees: a correction
            assert j.kind == "retry" and "carol,carol@x.io,editor" in \
                j.correction.what_was_wrong, j
    # a first check that makes the work's slip is no confirmation: the statement disagrees
    members.write_text("username,email,role\nanna,anna@x.io,admin\nbo,bo@x.io,viewer\n")
    av = validator(settings, goal, first.replace("editor", "viewer"), insert)
    j = av.judge(result([run(settings, "echo carol,carol@x.io,viewer >> members.csv")], "done"))
    assert not (j.outcome and j.outcome.verified), j


def test_a_query_reads_quoted_fields_and_compares_numbers_by_value(settings, ws):
    # a quoted comma and a header defeat `awk -F,`; the loader reads them as CSV. The file the
    # executor wrote says 900.0 where the query prints 900: the same number
    require_sandbox(settings, "a query runs as a program in the sandbox")
    from services.roles.programs import python_command
    (settings.workspace / "sales.csv").write_text(
        'region,customer,amount\nnorth,"Doe, Jane",400\nsouth,Ann,50.5\nnorth,Bo,500\n')
    goal = "Write each region of sales.csv and its total amount, as region,total lines " \
           "sorted by region, to totals.csv"
    program = ("import csv\nt = {}\nfor r in list(csv.reader(open('sales.csv')))[1:]:\n"
               "    t[r[0]] = t.get(r[0], 0) + float(r[2])\n"
               "with open('totals.csv', 'w') as f:\n"
               "    for k in sorted(t):\n        f.write(f'{k},{t[k]}\\n')")
    check = ("FILE: totals.csv\nPYTHON:\nimport csv\nt = {}\n"
             "for r in csv.DictReader(open('sales.csv')):\n"
             "    t[r['region']] = t.get(r['region'], 0) + float(r['amount'])\n"
             "for k in sorted(t):\n    print(f'{k},{t[k]}')")
    query = ("FILE: totals.csv\nSQL:\n```sql\nSELECT region, SUM(amount) FROM sales "
             "GROUP BY region ORDER BY region;\n```\nThis sums each region.")
    av = validator(settings, goal, check, query)
    j = av.judge(result([run(settings, python_command(program))], "done"))
    assert (settings.workspace / "totals.csv").read_text() == "north,900.0\nsouth,50.5\n"
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert "second independent check (query) `SQL SELECT region, SUM(amount) FROM sales GROUP " \
           "BY region ORDER BY region` printed: north,900\nsouth,50.5" in j.outcome.checks


def test_a_query_alone_does_not_confirm_that_a_file_of_rows_has_no_header(settings, ws):
    """The executor wrote the checker's own program (agreement no evidence), which dropped the
    header the goal keeps; the query in the other form prints rows only, so it "agreed": it
    cannot tell whether the rows should follow a header line, and "verified" waits for a check
    that could print one (dev name-email-copy was a false "verified" this way)."""
    require_sandbox(settings, "a query runs as a program in the sandbox")
    from services.roles.programs import python_command
    goal = "Make a copy of cities.csv that keeps only the city and country columns, and save " \
           "it as places.csv with its header."
    program = ("import csv\nw = csv.writer(open('places.csv', 'w', newline=''))\n"
               "for r in csv.DictReader(open('cities.csv')):\n"
               "    w.writerow([r['city'], r['country']])")
    av = validator(settings, goal, "FILE: places.csv\nPYTHON:\n" + program,
                   "FILE: places.csv\nSQL: SELECT city, country FROM cities;")
    j = av.judge(result([run(settings, python_command(program))], "done"))
    assert (settings.workspace / "places.csv").read_text().splitlines()[0] == "Oslo,Norway"
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
    assert any("a query prints rows only" in u for u in j.outcome.unverified), j.outcome


def test_a_query_neither_confirms_nor_refutes_the_layout_of_a_file_that_is_not_csv(settings,
                                                                                  ws):
    """dev books-md-table at e7e9187, a false "verified": asked for a markdown table, the
    executor wrote CSV to books.md; the query in the other form prints its rows comma-separated
    (code's rendering), so it "confirmed" the CSV rows under their header — and in the round
    before it had "refuted" a markdown table. A query's comma rows say nothing of the layout of
    a file that is not comma-separated: no check either way. The same query against a .csv
    file still confirms (test above)."""
    require_sandbox(settings, "a query runs as a program in the sandbox")
    from services.roles.programs import python_command
    goal = "Turn cities.csv into a markdown table of city and country, saved as cities.md, " \
           "with the header row on top."
    as_csv = ("import csv\nw = csv.writer(open('cities.md', 'w', newline=''))\n"
              "w.writerow(['city', 'country'])\nfor r in csv.DictReader(open('cities.csv')):\n"
              "    w.writerow([r['city'], r['country']])")
    as_table = ("import csv\nf = open('cities.md', 'w')\nf.write('| city | country |\\n|---|---|\\n')\n"
                "for r in csv.DictReader(open('cities.csv')):\n"
                "    f.write('| ' + r['city'] + ' | ' + r['country'] + ' |\\n')")
    query = "FILE: cities.md\nSQL: SELECT city, country FROM cities"
    for work in (as_csv, as_table):
        # the first check is the executor's own program: its agreement is no evidence, and
        # the query is asked to decide
        av = validator(settings, goal, "FILE: cities.md\nPYTHON:\n" + work, query)
        j = av.judge(result([run(settings, python_command(work))], "done"))
        assert j.kind == "matched" and not j.outcome.verified, (work, j.outcome)
        if work is as_csv:      # (the table: the query changed nothing on a copy: no check)
            assert any("is no comma-separated file" in u for u in j.outcome.unverified), \
                j.outcome
    # a query as the first check, the program standing in for it printed the table itself
    av = validator(settings, goal, query, "FILE: cities.md\nPYTHON:\n" + as_table.replace(
        "f.write(", "print(end=").replace("f = open('cities.md', 'w')\n", ""))
    j = av.judge(result([run(settings, python_command(as_csv))], "done"))
    assert j.kind != "matched" or not j.outcome.verified, j.outcome


def test_a_query_confirms_the_rows_after_a_header_of_its_columns(settings, ws):
    """dev active-users-csv: the file begins with the `name,email` header the goal asks for,
    then the right rows; the first check (a program) derived it whole, the query in the other
    form printed the rows — a query never prints a header — and "did not agree". Rows after a
    header naming the query's columns are what a query can confirm: verified. A header it does
    not name is still a disagreement."""
    require_sandbox(settings, "a query runs as a program in the sandbox")
    from services.roles.programs import python_command
    goal = "Save the city and country of every city in cities.csv to places.csv, with a " \
           "city,country header."
    program = ("import csv\nw = csv.writer(open('places.csv', 'w', newline=''))\n"
               "w.writerow(['city', 'country'])\nfor r in csv.DictReader(open('cities.csv')):\n"
               "    w.writerow([r['city'], r['country']])")
    check = ("FILE: places.csv\nPYTHON:\nimport csv\nprint('city,country')\n"
             "for r in csv.DictReader(open('cities.csv')):\n"
             "    print(r['city'] + ',' + r['country'])")
    av = validator(settings, goal, check, "FILE: places.csv\nSQL: SELECT city, country FROM cities")
    j = av.judge(result([run(settings, python_command(program))], "done"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    av = validator(settings, goal, check, "FILE: places.csv\nSQL: SELECT city, population FROM "
                                          "cities")
    j = av.judge(result([run(settings, python_command(program))], "done"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome


def test_a_file_a_first_query_confirms_differs_from_it_only_in_how_numbers_are_written(
        settings, ws):
    # the first program printed nothing, so a query stands in for it as the first check: it
    # prints 250 where the file says 250.0, and a quoted comma as the csv module writes it —
    # the same content, not a doubt about spaces at line ends
    require_sandbox(settings, "a query runs as a program in the sandbox")
    from services.roles.programs import python_command
    (settings.workspace / "sales.csv").write_text(
        'id,customer,amount\n1,"Acme, Inc.",120.50\n2,Globex,129.50\n')
    cases = [  # goal, file, query, the second check's program, the work's program
        ("Add up the amount column of sales.csv and put the number in total.txt", "total.txt",
         "SELECT SUM(amount) FROM sales",
         "import csv\nprint(sum(float(r['amount']) for r in csv.DictReader(open('sales.csv'))))",
         "import csv\nt = sum(float(r['amount']) for r in csv.DictReader(open("
         "'sales.csv')))\nopen('total.txt', 'w').write(str(t))"),
        ("Copy the rows of sales.csv without its header into rows.csv", "rows.csv",
         "SELECT * FROM sales",
         "import csv, sys\nw = csv.writer(sys.stdout)\n"
         "w.writerows(list(csv.reader(open('sales.csv')))[1:])",
         "import csv\nr = list(csv.reader(open('sales.csv')))[1:]\n"
         "csv.writer(open('rows.csv', 'w', newline='')).writerows(r)")]
    for goal, file, query, second, work in cases:
        av = validator(settings, goal, f"FILE: {file}\nPYTHON:\nimport csv",
                       f"FILE: {file}\nSQL: {query}", f"FILE: {file}\nPYTHON:\n{second}")
        j = av.judge(result([run(settings, python_command(work))], "done"))
        assert j.kind == "matched" and j.outcome.verified, (goal, j.outcome)
    assert (settings.workspace / "total.txt").read_text() == "250.0"


def test_a_query_that_reads_the_programs_way_on_misleading_data_is_not_independent(settings, ws):
    # executor and first check compare status with 'shipped' where the data also spells it
    # 'Shipped': their agreement needs an independent check, and a query looking for the same
    # value in the same column is the same reading, whatever the language
    require_sandbox(settings, "a query runs as a program in the sandbox")
    from services.roles.programs import python_command
    (settings.workspace / "orders.csv").write_text("id,status\n1,shipped\n2,Shipped\n3,shipped\n")
    count = ("import csv\nprint(sum(r['status'] == 'shipped' for r in "
             "csv.DictReader(open('orders.csv'))))")
    check = ("FILE: none\nPYTHON:\nimport csv\nn = 0\nfor r in csv.DictReader(open('orders.csv')):"
             "\n    if r['status'] == 'shipped':\n        n += 1\nprint(n)")
    av = validator(settings, "How many orders in orders.csv have status shipped?", check,
                   "FILE: none\nSQL: SELECT COUNT(*) FROM orders WHERE status = 'shipped'")
    j = av.judge(result([run(settings, python_command(count))], "2"))
    assert not j.outcome or not j.outcome.verified, j.outcome
    assert "status values: 'Shipped', 'shipped'" in av.verifier.llm.prompts[1]


def test_a_check_that_prints_a_value_it_was_told_is_no_evidence(settings, ws):
    """The value the goal means comes from an earlier session (the workspace no longer holds
    it): a check that echoes a literal it read from no input repeats the executor's belief, so
    the file is not verified; a literal the goal itself states, or values a program computes
    from the goal's numbers, are derivations."""
    from services.roles.derivation import restates
    (settings.workspace / "db.yaml").write_text("port: 5432\n")
    goal = "Write the port you found in the previous session into port.txt"
    av = validator(settings, goal, {"output_file": "port.txt", "command": "echo 8443"},
                   "FILE: port.txt\nPYTHON:\nprint('8443')")
    j = av.judge(result([run(settings, "echo 8443 > port.txt")], "done"))
    assert j.outcome and not j.outcome.verified, j.outcome
    assert any("repeats what the checker was told" in u for u in j.outcome.unverified), \
        j.outcome.unverified
    assert (settings.workspace / "port.txt").read_text() == "8443\n"
    assert restates("printf '8443\\n'", "8443", goal)
    assert not restates("echo milk", "milk", "Create groceries.txt holding the line milk")
    assert not restates("python3 -c 'print(\"\\n\".join(str(i * i) for i in range(1, 11)))'",
                        "1\n4\n9\n16", "Write the squares of 1 to 10 to squares.txt")
    assert not restates("grep -o 8443 db.yaml", "8443", goal)
    assert not restates("python3 -c 'print(open(\"db.yaml\").read().split()[1], 8443)'",
                        "5432 8443", goal)
    # words are values too: a name or a colour no input holds (world off, a false "verified")
    colour = "Write my favourite colour into colour.txt"
    av = validator(settings, colour, {"output_file": "colour.txt", "command": 'echo "blue"'},
                   "FILE: colour.txt\nPYTHON:\nprint('blue')")
    j = av.judge(result([run(settings, "echo blue > colour.txt")], "done"))
    assert j.outcome and not j.outcome.verified, j.outcome
    assert restates('echo "Your Name"', "Your Name", "Write my name into a file named name.txt")
    assert not restates('echo "hello"', "hello", "Create a file hello.txt that says hello")


def test_an_empty_folder_the_goal_asks_for_is_made_not_missing(settings, ws):
    # file snapshots do not see an empty folder: `mkdir atlas` was "the file atlas does not
    # exist" (with advice to open('atlas', 'w')) or "nothing in the workspace changed"
    for check in ({"output_file": "atlas", "command": "mkdir atlas"},
                  {"output_file": "", "command": "mkdir atlas"}):
        av = validator(settings, "Create a folder named atlas", check)
        j = av.judge(result([run(settings, "mkdir -p atlas")], "done"))
        assert j.kind == "matched" and not j.outcome.verified, (check, j)
        assert any("folders made: atlas" in c for c in j.outcome.checks), j.outcome.checks
    assert (ws / "atlas").is_dir()
    (ws / "atlas").rmdir()
    av = validator(settings, "Create a folder named atlas",
                   {"output_file": "atlas", "command": "mkdir atlas"})
    j = av.judge(result([run(settings, "mkdir project")], "done"))
    assert j.kind == "retry", j                               # the wrong folder is no folder


def test_a_check_deriving_a_refuted_earlier_result_does_not_fail_the_next_attempt(
        settings, ws):
    # attempt 1 lists full paths with find; the first check is the same find (no evidence), a
    # program in the other form derives bare names and contradicts both: a retry. Attempt 2
    # writes the bare names another way; the first check still derives the refuted full paths:
    # no evidence, and the program in the other form decides, and agrees
    from services.roles.programs import python_command
    require_sandbox(settings, "the checks in the other form are programs")
    for path in ("docs/a.txt", "docs/sub/b.txt"):
        (settings.workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (settings.workspace / path).write_text("x\n")
    goal = "Write the names (just the names, no folders) of the .txt files under docs/ to names.txt"
    names_py = ("FILE: names.txt\nPYTHON:\nimport os\nfor n in sorted(f for _, _, fs in "
                "os.walk('docs') for f in fs if f.endswith('.txt')):\n    print(n)")
    av = validator(settings, goal, {"output_file": "names.txt",
                                    "command": "find docs -name '*.txt' | sort"},
                   names_py, names_py.replace("sorted(", "list(sorted("
                                              ).replace("endswith('.txt'))", "endswith('.txt')))"))
    j = av.judge(result([run(settings, "find docs -name '*.txt' | sort > names.txt")], "done"))
    assert j.kind == "retry" and "a.txt\nb.txt" in j.correction.what_was_wrong, j
    (settings.workspace / "names.txt").unlink()
    second = python_command("import glob, os\nnames = sorted(os.path.basename(p) for p in "
                            "glob.glob('docs/**/*.txt', recursive=True))\n"
                            "open('names.txt', 'w').write(''.join(n + '\\n' for n in names))")
    j = av.judge(result([run(settings, second)], "done", attempt=2))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert (settings.workspace / "names.txt").read_text() == "a.txt\nb.txt\n"


def test_a_check_that_disagreed_on_its_own_keeps_failing_a_wrong_next_attempt(settings, ws):
    # the first check (dates by a regex) contradicts attempt 1 (whole timestamps) by itself;
    # attempt 2 writes nothing useful: the check still decides, whatever it shares with
    # attempt 1's line filter
    from services.roles.programs import python_command
    (ws / "auth.log").write_text("2024-05-01T09:12:03 LOGIN_OK user=ana\n"
                                 "2024-05-01T22:40:11 LOGIN_FAILED user=ben\n")
    goal = "Write the day of every failed login in auth.log to days.txt, one per line"
    check = ("FILE: days.txt\nPYTHON:\nfor line in open('auth.log'):\n"
             "    if 'LOGIN_FAILED' in line:\n        print(line.split('T')[0])")
    av = validator(settings, goal, check)
    first = python_command("out = open('days.txt', 'w')\nfor line in open('auth.log'):\n"
                           "    if 'LOGIN_FAILED' in line:\n        out.write(line.split()[0] + "
                           "'\\n')")
    j = av.judge(result([run(settings, first)], "done"))
    assert j.kind == "retry" and "2024-05-01\n" in j.correction.what_was_wrong, j
    (ws / "days.txt").unlink()
    j = av.judge(result([run(settings, "echo > days.txt")], "done", attempt=2))
    assert j.kind == "failed" and not j.outcome.verified, j


COUNT_ERROR_LOG = ("2024-05-01 09:00:00 INFO a\n2024-05-01 09:00:01 [ERROR] b\n"
                   "2024-05-01 09:00:02 INFO retry after ERROR\n2024-05-01 09:00:03 [ERROR] d\n")


@pytest.mark.parametrize("resample, verified", [
    # one more sample in the first form reads the data the refuted check's way: no evidence
    ({"output_file": "", "command": "grep -c ERROR app.log"}, False),
    # it reads it another way and derives another value: no second derivation agrees
    ({"output_file": "", "command": "grep -ci error app.log"}, False),
    # it reads the level another way and derives the shown value: two forms agree
    ({"output_file": "", "command": "grep -c '\\[ERROR\\]' app.log"}, True),
])
def test_an_answer_copied_from_a_shown_check_is_done_and_verified_only_by_a_new_derivation(
        settings, ws, resample, verified):
    # attempt 1 counts ERROR anywhere in the line; the first check does the same (no evidence)
    # and the query by level contradicts it: a correction shows "2". Attempt 2's command fails
    # and the executor answers 2: not a value from nowhere (the correction showed it), not
    # failed by the first check (the method attempt 1 left). The shown query cannot confirm its
    # own output: verified only when one more sample in the first form derives 2 too
    require_sandbox(settings, "the query runs as a program in the sandbox")
    (ws / "app.log").write_text(COUNT_ERROR_LOG)
    goal = "How many entries in app.log have the level ERROR?"
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   "FILE: none\nSQL: SELECT COUNT(*) FROM app WHERE level = 'ERROR'", resample)
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "3"))
    assert j.kind == "retry" and "printed: 2" in j.correction.what_was_wrong, j
    j = av.judge(result([run(settings, "cat app.lg")], "2", attempt=2))
    assert j.kind == "matched" and j.outcome.verified == verified, j.outcome
    assert verified or any("repeats what a correction showed" in u
                           for u in j.outcome.unverified), j.outcome
    assert av.verifier.llm.temperatures[-1] == 0.7            # the resample is asked freer
    assert av.verifier.llm.replies == []


def test_a_copied_answer_the_shown_check_did_not_derive_is_not_verified_by_a_resample(
        settings, ws):
    # the executor answers 3 after a correction showed 2: a resample that derives 3 (the
    # refuted reading) verifies nothing — the answer is not what the other form derived
    require_sandbox(settings, "the query runs as a program in the sandbox")
    (ws / "app.log").write_text(COUNT_ERROR_LOG)
    goal = "How many entries in app.log have the level ERROR?"
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app.log"},
                   "FILE: none\nSQL: SELECT COUNT(*) FROM app WHERE level = 'ERROR'",
                   {"output_file": "", "command": "grep -ci error app.log"})
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "3"))
    assert j.kind == "retry", j
    j = av.judge(result([run(settings, "cat app.lg")], "3", attempt=2))
    assert not (j.outcome and j.outcome.verified), j


def test_a_value_the_world_recorded_is_a_reference_the_work_can_contradict_never_evidence(
        settings, ws):
    # the port was found in an earlier session (a fact of the world's projection in the
    # context); the file it came from is gone. A check that echoes that fact's value fails a
    # file holding another value (a correction naming it), and agrees with the right one only
    # as "unverified": no input of this session holds the value
    from services.runtime import world
    require_sandbox(settings, "the second check in another form is a program")
    context = (f"{world.PROJECTION_HEADER}\n- [today 10:02] answer to 'What port does "
               f"config/app.yaml set?': 8431\n- [today 10:02] config/app.yaml sets port = 8431")
    goal = "Write the port you found in the previous session into port.txt"
    echo = {"output_file": "port.txt", "command": "echo 8431"}
    av = validator(settings, goal, echo, context=context)
    j = av.judge(result([run(settings, "echo 8443 > port.txt")], "done"))
    assert j.kind == "retry" and "expects:\n8431" in j.correction.what_was_wrong, j
    (settings.workspace / "port.txt").unlink()
    av = validator(settings, goal, echo, "FILE: port.txt\nPYTHON:\nprint('8431')",
                   context=context)
    j = av.judge(result([run(settings, "echo 8431 > port.txt")], "done"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
    assert any("the world model recorded in an earlier session" in u
               for u in j.outcome.unverified), j.outcome.unverified


def test_a_check_that_writes_a_file_into_a_folder_the_goal_makes_is_a_derivation(settings, ws):
    # `cp notes/todo.txt backup/todo.txt` in the scratch copy: the folder the goal makes is
    # made for it, and what it wrote is its derivation
    require_sandbox(settings, "a writing check runs confined on a scratch copy")
    (settings.workspace / "notes").mkdir()
    (settings.workspace / "notes" / "todo.txt").write_text("milk\neggs\n")
    goal = "Back up notes/todo.txt as backup/todo.txt (the backup folder doesn't exist yet)."
    av = validator(settings, goal,
                   {"output_file": "backup/todo.txt", "command": "cp notes/todo.txt backup/todo.txt"},
                   "FILE: backup/todo.txt\nPYTHON:\nprint(open('notes/todo.txt').read(), end='')")
    j = av.judge(result([run(settings, "mkdir -p backup && cp notes/todo.txt backup/todo.txt")],
                        "done"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert (settings.workspace / "backup" / "todo.txt").read_text() == "milk\neggs\n"


def test_a_query_by_the_level_word_contradicts_a_count_of_the_word_anywhere(settings, ws):
    # executor and first check count lines holding ERROR anywhere (one method: no evidence);
    # the query over the log's words counts the lines whose level is ERROR: contradicted
    require_sandbox(settings, "a query runs as a program in the sandbox")
    (settings.workspace / "app.log").write_text(
        "2024-05-01 09:00:00 INFO a\n2024-05-01 09:00:01 [ERROR] b\n"
        "2024-05-01 09:00:02 INFO retry after ERROR\n2024-05-01 09:00:03 [ERROR] d\n")
    goal = "How many entries in app.log have the level ERROR?"
    first = {"output_file": "", "command": "grep -c ERROR app.log"}
    av = validator(settings, goal, first,
                   "FILE: none\nSQL: SELECT COUNT(*) FROM app WHERE level = 'ERROR'")
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "3"))
    assert j.kind == "retry" and "printed: 2" in j.correction.what_was_wrong, j
    assert "level values: 'ERROR', 'INFO'" in av.verifier.llm.prompts[1]
    # a query that matches the word anywhere in the line repeats the executor's method
    av = validator(settings, goal, first,
                   "FILE: none\nSQL: SELECT COUNT(*) FROM app WHERE line LIKE '%ERROR%'",
                   "FILE: none\nPYTHON:\nprint(sum('ERROR' in l for l in open('app.log')))")
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "3"))
    assert not (j.outcome and j.outcome.verified), j


def test_the_checker_is_not_shown_the_memory_of_the_executors_method(settings, ws):
    """A recalled SOP carries an earlier run's commands and values: a checker shown it copies
    them and is no longer independent. The rest of the context (the world's facts) it keeps."""
    context = ("SHOULD PREFER (worked before): Succeeded. Tools: shell:printf '%s\\n' 985000 > t\n"
               "MUST NOT (failed before): Failed. Tools: shell:grep Norway cities.csv\n"
               "CAUTION (mixed results before — confirm each step): Tools: shell:awk\n"
               "The populations are from the 2020 census.")
    llm = FakeLLM(NORWAY_SH, SUM_PY)
    verifier = Verifier(subtask("Total population of the Norwegian cities in cities.csv?",
                                context), llm, settings)
    verifier.start()
    VERIFIERS[-1].append(verifier)
    prompt = verifier.prompt()
    assert "Context: The populations are from the 2020 census." in prompt
    assert "985000" not in prompt and "SHOULD PREFER" not in prompt and "MUST NOT" not in prompt
    assert "CAUTION" not in prompt and "grep Norway" not in prompt


def test_a_stand_in_check_that_crashed_is_shown_its_error_and_asked_once_more(settings, ws):
    """The first check derived nothing; the other form's query crashed. Asked the same
    question it would crash again: it is shown its own reply and the error, and the mended one
    stands in."""
    require_sandbox(settings, "the stand-in is a query run as a program in the sandbox")
    av = biggest_city_with_a_check_that_derives_nothing(settings)
    av.verifier.llm.replies += ["FILE: biggest.txt\nSQL: SELECT nosuch FROM cities",
                                BIGGEST_SQL, BIGGEST_PY]
    j = av.judge(result([run(settings, "echo Oslo > biggest.txt")], "biggest.txt written"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert any("stands in" in c for c in j.outcome.checks), j.outcome.checks
    repair = av.verifier.llm.prompts[2]
    assert "SELECT nosuch FROM cities" in repair and "no such column: nosuch" in repair, repair


def test_a_second_check_that_crashed_is_mended_from_its_error_and_stays_independent(settings,
                                                                                     ws):
    """The second check's program crashes on a slip of its own (dev latest-login: a datetime
    compared with 0, twice, so a right answer stayed unverified). Shown its reply and its error
    — and nothing of the executor's work — it mends the slip, and its agreement verifies."""
    require_sandbox(settings, "the second check in another form is a program")
    broken = ("FILE: none\nPYTHON:\nimport csv\ntotal = 0\nfor r in csv.DictReader(open("
              "'cities.csv')):\n    if r['country'] == 'Norway':\n        total += "
              "r['population']\nprint(total)")
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   NORWAY_SH, broken, SUM_PY)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    repair = av.verifier.llm.prompts[2]
    assert "total += r['population']" in repair and "TypeError" in repair, repair
    assert SUM not in repair and "985000" not in repair, repair
    # asked freer: at temperature 0 the model repeated the crashed program verbatim
    assert av.verifier.llm.temperatures == [None, None, 0.7], av.verifier.llm.temperatures
    # mended, it still disagrees: a contradiction as ever, never "verified"
    wrong = SUM_PY.replace("'Norway'", "'France'")
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   NORWAY_SH, broken, wrong)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert not (j.outcome and j.outcome.verified), j


def test_a_change_goal_whose_file_no_work_changed_and_no_check_confirms_is_not_done(settings,
                                                                                   ws):
    """dev root-log-level: a replace that matched no line left logging.conf as it was, and the
    check could not run: "done, but not verified" rested on nothing. The attempt failed; with
    the change made, the same missing check leaves it done but unverified, as before."""
    conf = ws / "logging.conf"
    conf.write_text("[logger_root]\nlevel=DEBUG\n[logger_db]\nlevel=DEBUG\n")
    goal = "can u switch the root logger in logging.conf from DEBUG to WARNING?"
    no_check = "FILE: logging.conf\nCOMMAND: "
    av = validator(settings, goal, no_check)
    j = av.judge(result([run(settings, "sed -n 1p logging.conf")], "done"))
    assert j.kind == "retry" and "nothing in the workspace changed" in \
        j.correction.what_was_wrong, j
    av = validator(settings, goal, no_check)
    conf.write_text("[logger_root]\nlevel=WARNING\n[logger_db]\nlevel=DEBUG\n")
    j = av.judge(result([run(settings, "cat logging.conf")], "done"))
    assert j.kind == "matched" and not j.outcome.verified, j


def test_a_file_holding_only_the_programs_own_message_is_not_done(settings, ws):
    """dev avg-200-latency at f2597a5: the work's parse matched no line of the log, so its
    program wrote its own 'No requests with status 200 found' into avg_200.txt; no check could
    run, and "done, but not verified" rested on a text nothing read had shaped. The attempt
    failed. The same program that matches writes the value (done); a text the goal gives, or
    one the data holds, is no message of the program's own."""
    from services.roles.programs import python_command
    (ws / "api.log").write_text("2024-05-01 GET /api/users 200 0.120s\n"
                                "2024-05-01 GET /api/users 500 0.300s\n"
                                "2024-05-01 POST /api/login 200 0.150s\n")
    goal = "how slow are the requests that came back 200 in api.log on average? write the " \
           "avg time in ms to avg_200.txt"
    program = ("total = 0\ncount = 0\nwith open('api.log') as f, open('avg_200.txt', 'w') as "
               "out:\n    for line in f:\n        parts = line.split()\n        if len(parts) "
               "== 6 and parts[3] == '200':\n            total += float(parts[4][:-1]) * 1000\n"
               "            count += 1\n    if count:\n        out.write(f'{total / count:.1f}')"
               "\n    else:\n        out.write(MESSAGE)")
    no_check = "FILE: avg_200.txt\nCOMMAND: "

    def judge(goal, program):
        av = validator(settings, goal, no_check)
        return av.judge(result([run(settings, python_command(program))], "done"))

    wrong = program.replace("MESSAGE", "'No requests with status 200 found'")
    j = judge(goal, wrong)
    assert j.kind == "retry" and "spelt out" in j.correction.what_was_wrong, j
    assert "api.log" in j.correction.what_to_do, j.correction
    j = judge(goal, wrong.replace("== 6", "== 5"))
    assert j.kind == "matched" and not j.outcome.verified, j
    assert (ws / "avg_200.txt").read_text() == "135.0"
    # the goal's own words for "none", and a text the data holds, typed out
    j = judge(goal + ", or none if there are none", program.replace("MESSAGE", "'none'"))
    assert j.kind == "matched", j
    j = judge(goal, program.replace("MESSAGE", "'GET /api/users'"))
    assert j.kind == "matched", j


def test_a_file_an_earlier_round_left_is_no_derivation_of_a_check_that_wrote_nothing(settings,
                                                                                     ws):
    """dev avg-200-latency: an earlier round wrote a wrong 10.0 to avg.txt; the next round's
    check matched no line, printed nothing and wrote nothing — and the 10.0 on its scratch copy
    was taken for its derivation, agreeing with the wrong file. Only a file the check wrote is
    its derivation; one that writes it still counts."""
    require_sandbox(settings, "the check is a program run on a scratch copy")
    from services.roles.programs import python_command
    (ws / "avg.txt").write_text("10.0\n")
    goal = "Write the average population of the cities in cities.csv to avg.txt"
    silent = ("FILE: avg.txt\nPYTHON:\nimport csv\nfor r in csv.DictReader(open('cities.csv')):\n"
              "    if r['country'] == 'Mars':\n        print(r['population'])")
    av = validator(settings, goal, silent, "FILE: avg.txt\nCOMMAND: ")
    j = av.judge(result([run(settings, python_command("open('avg.txt', 'w').write('10.0\\n')"))],
                        "done"))
    # derived nothing, and the work left avg.txt as it was: not done
    assert j.kind == "retry" and "holds exactly" not in str(j), j
    assert "nothing in the workspace changed" in j.correction.what_was_wrong, j
    writes = ("FILE: avg.txt\nPYTHON:\nimport csv\nrows = list(csv.DictReader(open('cities.csv'"
              ")))\nopen('avg.txt', 'w').write(str(sum(int(r['population']) for r in rows) / "
              "len(rows)) + '\\n')")
    av = validator(settings, goal, writes)
    j = av.judge(result([run(settings, python_command("open('avg.txt', 'w').write('10.0\\n')"))],
                        "done"))
    assert j.kind == "retry" and "501666" in j.correction.what_was_wrong, j


def test_a_first_check_that_crashed_is_mended_in_its_own_form(settings, ws):
    """The first check's program names a key the file lacks (dev server-port: a configparser
    section that is not there). Shown its reply and the KeyError it is asked once more in its
    form, before the other form stands in; the mended check decides like any first check."""
    require_sandbox(settings, "the first check is a program")
    broken = SUM_PY.replace("r['population']", "r['pop']")
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   broken, SUM_PY, NORWAY_SH)
    j = av.judge(result([run(settings, SUM)], "985000"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    prompts = av.verifier.llm.prompts
    assert "KeyError: 'pop'" in prompts[1] and "r['pop']" in prompts[1], prompts[1]
    assert av.verifier.llm.temperatures[:2] == [None, 0.7], av.verifier.llm.temperatures
    assert any("printed: 985000" in c for c in j.outcome.checks), j.outcome.checks


def test_a_crashed_check_is_repaired_once_however_often_it_is_asked(settings, ws):
    """dev extract-warnings at 65612b9: the first check's program crashed and its repair
    crashed verbatim; a query stood in; the k-of-N step asked the program form again — the same
    question, the same crashed reply (at temperature 0 the client answers it from its cache) —
    and repaired it once more, verbatim again, and the executor's retry found the task's budget
    spent. A crash already repaired is not repaired again: its repair is the answer."""
    require_sandbox(settings, "the checks are programs and a query")
    broken = SUM_PY.replace("r['population']", "r['pop']")
    llm_replies = [broken, broken, NORWAY_SQL, broken, NORWAY_SQL]
    av = validator(settings, "Total population of the Norwegian cities in cities.csv?",
                   *llm_replies)
    j = av.judge(result([run(settings, SUM)], "985000"))
    prompts = av.verifier.llm.prompts
    assert sum("It failed when it ran" in p for p in prompts) == 1, prompts
    assert len(prompts) == 5 and av.verifier.llm.replies == [], prompts
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
    assert any("KeyError" in u for u in j.outcome.unverified), j.outcome.unverified


def test_a_mended_check_is_told_where_a_file_it_could_not_open_is():
    """dev abs-path-total: the second check opened data/sales_q1.csv (the file is
    data/2024/sales_q1.csv); shown only its error it wrote the same path again. Code resolves
    the name in the workspace and says where it is; an error that names no path adds nothing."""
    from services.roles.derivation import missing_path, repair_note
    from services.roles.verifier import DerivedCheck
    files = ["data/2024/sales_q1.csv", "data/README.txt"]
    crashed = DerivedCheck(reply="FILE: total.txt\nPYTHON:\nopen('/ws/data/sales_q1.csv')",
                           error="exit status 1: FileNotFoundError: [Errno 2] No such file or "
                                 "directory: '/ws/data/sales_q1.csv'")
    note = repair_note(crashed, files)
    assert "It failed when it ran: exit status 1: FileNotFoundError" in note
    assert "There is no /ws/data/sales_q1.csv: sales_q1.csv is data/2024/sales_q1.csv" in note
    assert missing_path("exit status 1: cat: notes/a.txt: No such file or directory") == \
        "notes/a.txt"
    typo = DerivedCheck(reply="x", error="exit status 1: TypeError: can't compare")
    assert "There is no" not in repair_note(typo, files) and repair_note(None, files) == ""


def test_a_mended_check_sees_the_small_file_it_read_whole(settings, ws):
    """dev server-port: the check, shown the first lines of config/app.ini (comments), guessed
    `config['application']` and crashed with a KeyError; asked again with only its error it
    wrote the same program. The repair is shown the small file the goal names and the program
    read, whole, as the executor saw it — then the mended check and one in the other form
    confirm the port."""
    require_sandbox(settings, "the first check is a program")
    from services.safety import referents
    conf = ws / "config"
    conf.mkdir()
    (conf / "app.ini").write_text("; Application configuration\n; edit with care\n\n[database]\n"
                                  "port = 5432\n\n[server]\n; port = 80\nport = 8080\n")
    goal = "According to config/app.ini, which port does the web server listen on?"
    guess = ("FILE: none\nPYTHON:\nimport configparser\nc = configparser.ConfigParser()\n"
             "c.read('config/app.ini')\nprint(c['application']['port'])")
    mended = guess.replace("'application'", "'server'")
    other = "FILE: none\nCOMMAND: sed -n '/^\\[server\\]/,/^\\[/p' config/app.ini | awk '$1 == \"port\" {print $3}'"
    av = validator(settings, goal, guess, mended, other)
    av.subtask.referents = [r.as_dict() for r in referents.resolve(goal, str(ws))]
    work = "awk -F' = ' '/^\\[server\\]/{s=1} s && $1==\"port\"{print $2; exit}' config/app.ini"
    j = av.judge(result([run(settings, work)], "8080"))
    repair = av.verifier.llm.prompts[1]
    assert "KeyError" in repair and "config/app.ini as it is (whole):" in repair, repair
    assert "[server]\n; port = 80\nport = 8080" in repair and work not in repair, repair
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    # an error that names a missing path is answered with where the file is, not its text
    from services.roles.derivation import repair_note
    from services.roles.verifier import DerivedCheck
    lost = DerivedCheck(reply="PYTHON:\nopen('app.ini')", error="FileNotFoundError: [Errno 2] "
                        "No such file or directory: 'app.ini'")
    assert "as it is" not in repair_note(lost, ["config/app.ini"], {"config/app.ini": "x"})


def test_a_check_that_printed_only_zero_is_no_evidence_either_way(settings, ws):
    """A check with a bug prints what a command over missing data prints (0): that neither
    confirms nor refutes the answer, so it is not thrown away (dev berlin-office-count: a right
    count was refuted by `'Berlin' in x.lower()`, printed 0, and the task ended abandoned).
    The check in the other form decides: it and a resample of the first confirm → verified; it
    alone → done, but not verified; it prints 0 as well, against an answer stating a count, or
    nothing of use → failed, as before (never "done" on no evidence at all)."""
    require_sandbox(settings, "the second check in another form is a program")
    goal = "How many ERROR lines are in app.log?"
    zero = "FILE: none\nPYTHON:\nprint(sum(1 for l in open('app.log') if 'ERROR' in l.lower()))"
    executor = "awk '$1 == \"ERROR\" {n++} END {print n}' app.log"
    av = validator(settings, goal, zero, {"output_file": "", "command": "grep -c ERROR app.log"},
                   COUNT_ERRORS_PY)
    j = av.judge(result([run(settings, executor)], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    # one check confirmed it and the resample of the first printed 0 again: one opinion
    av = validator(settings, goal, zero, {"output_file": "", "command": "grep -c ERROR app.log"},
                   zero)
    j = av.judge(result([run(settings, executor)], "2"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
    av = validator(settings, goal, zero, {"output_file": "", "command": "grep -c NOTHING app.log"},
                   *[zero] * 2)
    j = av.judge(result([run(settings, executor)], "2"))
    assert j.kind == "retry" and "does not agree" in j.correction.what_was_wrong, j
    av = validator(settings, goal, zero, {"output_file": "", "command": "echo"}, *[zero] * 2)
    j = av.judge(result([run(settings, executor)], "2"))
    assert j.kind == "retry" and "no independent check confirms" in \
        j.correction.what_was_wrong, j


def test_a_check_that_printed_another_kind_of_value_answered_another_question(settings, ws):
    """dev largest-data-file: the answer named the file (data/archive/events_2022.json, right)
    and the first check printed its size (`4.0k`), which "the answer does not state" refuted it,
    twice. A number where the answer states a file name (or a name where it states a number) is
    a check that answered another question: no evidence either way, like a check that printed
    0 — the other form, with a resample of the first, decides; a check of the answer's own kind
    still refutes it."""
    require_sandbox(settings, "the second check in another form is a program")
    (ws / "big.bin").write_text("x" * 2048)
    (ws / "small.txt").write_text("x")
    goal = "Which file in this folder is the largest?"
    size = {"output_file": "", "command": "ls -S | head -1 | xargs du -h | cut -f1"}
    largest = "FILE: none\nPYTHON:\nimport os\nprint(max(os.listdir('.'), key=os.path.getsize))"
    work = "ls -S | head -1"
    av = validator(settings, goal, size, largest, largest)
    j = av.judge(result([run(settings, work)], "big.bin"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    av = validator(settings, goal, {"output_file": "", "command": "ls -S | tail -1"})
    j = av.judge(result([run(settings, work)], "big.bin"))
    assert j.kind == "retry" and "small.txt" in j.correction.what_was_wrong, j
    assert ev.agree("big.bin", "4.0k").void and ev.agree("12", "app.log").void
    assert not ev.agree("45", "30").void and not ev.agree("Oslo", "Bergen").void


def test_a_valueless_check_that_read_a_sibling_supports_nothing(settings, ws):
    """The first check printed 0 and read app2.log, a near match of the app.log the goal names:
    no check supports the answer at all, so it fails — not "done, but not verified"."""
    from services.safety import referents
    (settings.workspace / "app2.log").write_text("INFO x\n")
    goal = "How many ERROR lines are in app.log?"
    av = validator(settings, goal, {"output_file": "", "command": "grep -c ERROR app2.log"})
    av.subtask.referents = [r.as_dict() for r in referents.resolve(goal, str(settings.workspace))]
    j = av.judge(result([run(settings, "grep -c ERROR app.log")], "2"))
    assert j.kind == "retry" and "no independent check confirms" in \
        j.correction.what_was_wrong, j


def test_a_check_that_changed_its_copy_found_a_change_not_nothing(settings, ws):
    """A change asked in words no list names ("turn that around"): the executor's command
    printed nothing and changed nothing, and it says nothing was found. The check's program
    renamed the files on its copy and printed nothing — it made the change, it did not find
    nothing — so the goal is not `not_possible` (dev date-first-renames at 713dd00 ended a
    confirmed not_possible this way): the workspace is compared with the copy, the attempt
    failed. Done right, the same checks verify it, the second in the other form on a copy too."""
    require_sandbox(settings, "a check that changes files runs only in the sandbox, on a copy")
    (ws / "archive").mkdir()
    for name in ("web-2023.log", "db-2023.log"):
        (ws / "archive" / name).write_text(name)
    goal = ("the logs in archive/ carry the year last in their names - could you turn that "
            "around so the year comes first? web-2023.log should end up as 2023-web.log")
    flip = ("FILE: none\nPYTHON:\nimport os\nfor f in os.listdir('archive'):\n"
            "    stem, year = f[:-4].rsplit('-', 1)\n"
            "    os.rename('archive/' + f, 'archive/' + year + '-' + stem + '.log')")
    flip_sh = {"output_file": "", "command": "cd archive && for f in *-2023.log; do "
                                             "mv \"$f\" \"2023-${f%-2023.log}.log\"; done"}
    av = validator(settings, goal, flip, flip_sh)
    j = av.judge(result([run(settings, "ls archive | grep -c '^2023-' || true")],
                        "nothing found: the command printed nothing", status="not_possible"))
    assert j.kind == "retry", j
    assert "missing: archive/2023-db.log, archive/2023-web.log" in j.correction.what_was_wrong
    assert sorted(os.listdir(ws / "archive")) == ["db-2023.log", "web-2023.log"]
    av = validator(settings, goal, flip, flip_sh)
    work = run(settings, "cd archive && mv web-2023.log 2023-web.log && mv db-2023.log "
                         "2023-db.log")
    j = av.judge(result([work], "renamed"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    assert any("second independent check (command)" in c for c in j.outcome.checks), j.outcome


def test_work_and_checks_that_never_read_the_value_the_goal_singles_out_verify_nothing(
        settings, ws):
    """dev login-ip-top at 8243677, a false "verified": "which ip hit /login the most" — the
    executor's program and both checks counted every request per address and agreed on the
    busiest address overall. /login is a value of the log (referents: no path on disk, a
    string of the data); work that never reads it answered another question (the attempt
    fails and is told so), and a check that never reads it confirms nothing. Reading it, the
    same shapes verify the right address."""
    require_sandbox(settings, "the checks are programs")
    from services.roles.programs import python_command
    from services.safety import referents
    (ws / "access.log").write_text(
        '10.0.0.7 "GET /login"\n10.0.0.12 "GET /"\n10.0.0.7 "POST /login"\n'
        '10.0.0.12 "GET /blog"\n10.0.0.12 "GET /about"\n10.0.0.9 "GET /login"\n')
    goal = "which ip hit /login the most in access.log? just the one address"
    def count(where: str) -> str:
        return ("import collections\nc = collections.Counter(l.split()[0] for l in "
                f"open('access.log'){where})\nprint(c.most_common(1)[0][0])")
    every, login = count(""), count(" if l.split()[2].strip('\"') == '/login'")
    check = "FILE: none\nPYTHON:\n" + every
    for work in (every, login):
        av = validator(settings, goal, check, "FILE: none\nCOMMAND: awk '{print $1}' access.log"
                       " | sort | uniq -c | sort -nr | head -1 | awk '{print $2}'", check)
        av.subtask.referents = [r.as_dict() for r in referents.resolve(goal, str(ws))]
        rec = run(settings, python_command(work))
        j = av.judge(result([rec], rec.output.strip()))
        if work is every:
            assert rec.output.strip() == "10.0.0.12"
            assert j.kind == "retry" and "never reads" in j.correction.what_was_wrong, j
            assert "NOT POSSIBLE" not in j.correction.what_to_do, j   # it is in the data
        else:   # right work; the checks that ignore /login disagree or confirm nothing
            assert rec.output.strip() == "10.0.0.7"
            assert not (j.kind == "matched" and j.outcome.verified), j
    av = validator(settings, goal, "FILE: none\nPYTHON:\n" + login,
                   "FILE: none\nCOMMAND: grep -F ' /login' access.log | awk '{print $1}' | sort "
                   "| uniq -c | sort -nr | head -1 | awk '{print $2}'")
    av.subtask.referents = [r.as_dict() for r in referents.resolve(goal, str(ws))]
    rec = run(settings, python_command(login))
    j = av.judge(result([rec], "10.0.0.7"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome


def test_a_resample_that_reads_and_prints_as_the_first_check_did_confirms_nothing(settings, ws):
    """dev books-md-table at 432b1db, a false "verified": the work wrote the data rows of a
    CSV as a markdown table without its header row; the first check (a program) wrote the same
    rows; the query in the other form is no check of a markdown file's layout; so one more
    sample in the first form was asked — and it read the same fields of the same file and
    printed them in the same shape, its variable names and `open()`'s arguments aside. One
    model's same method twice is one opinion: done, but not verified."""
    require_sandbox(settings, "a check runs as a program in the sandbox")
    from services.roles.programs import python_command
    (settings.workspace / "lists").mkdir()
    (settings.workspace / "lists" / "books.csv").write_text(
        'title,author,year\n"Name of the Rose, The",Umberto Eco,1980\nDune,Frank Herbert,1965\n')
    goal = ("could you turn lists/books.csv into a markdown table and save it as lists/books.md? "
            "same columns, header row on top")
    work = ("import csv\nwith open('lists/books.csv', newline='') as csvfile:\n"
            "    reader = csv.DictReader(csvfile)\n"
            "    with open('lists/books.md', 'w') as mdfile:\n"
            "        for row in reader:\n"
            "            mdfile.write(f\"| {row['title']} | {row['author']} | {row['year']} |\\n\")")
    first = "FILE: lists/books.md\nPYTHON:\n" + work
    query = "FILE: lists/books.md\nSQL: SELECT title, author, year FROM books"
    resample = ("FILE: lists/books.md\nPYTHON:\nimport csv\n"
                "csv_reader = csv.DictReader(open('lists/books.csv'))\n"
                "with open('lists/books.md', 'w') as markdown_file:\n"
                "    for row in csv_reader:\n"
                "        markdown_file.write(f\"| {row['title']} | {row['author']} | "
                "{row['year']} |\\n\")\nmarkdown_file.close()")
    av = validator(settings, goal, first, query, resample)
    j = av.judge(result([run(settings, python_command(work))], "done"))
    assert j.kind == "matched" and not j.outcome.verified, (j.kind, j.correction, j.outcome)
    assert any("read the data the first check's way" in u for u in j.outcome.unverified), \
        j.outcome.unverified
    # right work, and a resample that reads the data otherwise (by position, not by name) and
    # derives the same table: a second opinion, verified
    right = ("import csv\nrows = list(csv.DictReader(open('lists/books.csv')))\n"
             "f = open('lists/books.md', 'w')\nf.write('| title | author | year |\\n|---|---|---|\\n')\n"
             "for r in rows:\n    f.write(f\"| {r['title']} | {r['author']} | {r['year']} |\\n\")")
    other = ("FILE: lists/books.md\nPYTHON:\nimport csv\n"
             "head, *rows = list(csv.reader(open('lists/books.csv')))\n"
             "print('| ' + ' | '.join(head) + ' |')\nprint('|' + '---|' * len(head))\n"
             "for r in rows:\n    print('| ' + ' | '.join(r) + ' |')")
    av = validator(settings, goal, "FILE: lists/books.md\nPYTHON:\n" + right, query, other)
    j = av.judge(result([run(settings, python_command(right))], "done"))
    assert j.kind == "matched" and j.outcome.verified, (j.kind, j.correction, j.outcome)
    assert "one more derivation in the first check's form" in j.outcome.criteria_verdicts[0].evidence


CREW = ("name\toffice\tprevious_office\n" "Lena Vogt\tBerlin\tHamburg\n" "Tom Reyes\tLisbon\tBerlin\n"
        "Sara Kim\tberlin\t-\n" "Jonas Ek\tBerlin\tBerlin\n" "Kai Wu\tBerlin\tLisbon\n")
CREW_EXACT = ("FILE: none\nPYTHON:\nimport csv\nprint(sum(1 for r in csv.DictReader(open('crew.tsv'), "
              "delimiter='\\t') if r['office'] == 'Berlin'))")
CREW_FOLDED = ("FILE: none\nPYTHON:\nimport csv\nprint(sum(1 for r in csv.DictReader(open('crew.tsv'),"
               " delimiter='\\t') if r['office'].strip().lower() == 'berlin'))")


def test_a_check_that_compares_a_field_spelt_several_ways_exactly_is_no_evidence(settings, ws):
    """crew.tsv's office holds 'Berlin' and 'berlin'; a check that compares it with 'Berlin'
    exactly leaves Sara out, so what it prints says nothing either way (dev berlin-office-count
    at 902bc13 ended a false "verified" 3 for 4: a query that misread the goal printed 3, the
    executor shown it answered 3 by `line.split()[2] == 'Berlin'`, and a resample's
    `r['office'] == 'Berlin'` printed 3 too). Its agreement verifies nothing; its disagreement
    refutes nothing — the other form, with a resample that folds the spellings, decides."""
    require_sandbox(settings, "the checks are programs")
    (ws / "crew.tsv").write_text(CREW)
    goal = "How many people in crew.tsv are based in Berlin right now?"
    zero = ("FILE: none\nPYTHON:\nimport csv\nprint(sum(1 for r in csv.DictReader(open('crew.tsv'),"
            " delimiter='\\t') if 'Berlin' in r['office'].lower()))")
    misread = "FILE: none\nSQL: SELECT COUNT(*) FROM crew WHERE office = 'Berlin' AND " \
        "previous_office != 'Berlin'"
    split = ("python3 -c \"print(sum(1 for l in list(open('crew.tsv'))[1:] "
             "if l.split()[2] == 'Berlin'))\"")
    av = validator(settings, goal, zero, misread, CREW_EXACT)
    j = av.judge(result([run(settings, split)], "3"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
    assert any("without folding case" in u for u in j.outcome.unverified), j.outcome.unverified
    # the same exact check, first, against the right 4: no refutation; the query and a
    # resample that folds the spellings confirm it
    folded = "python3 -c \"import csv; print(sum(1 for r in csv.DictReader(open('crew.tsv'), " \
        "delimiter='\\t') if r['office'].lower() == 'berlin'))\""
    right = "FILE: none\nSQL: SELECT COUNT(*) FROM crew WHERE office = 'Berlin'"
    av = validator(settings, goal, CREW_EXACT, right, CREW_FOLDED)
    j = av.judge(result([run(settings, folded)], "4"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    # confirmed by the query alone, the resample exact again: done, but not verified
    av = validator(settings, goal, CREW_EXACT, right, CREW_EXACT)
    j = av.judge(result([run(settings, folded)], "4"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome
