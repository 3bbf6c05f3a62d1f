"""Outcome from the record (services/safety/record.py, Law 0 in R4a): "done" only when the work
happened. A failed command's error as the answer, a file the goal makes left missing, "nothing
found" for what the workspace holds, and work that read another file than the one named are
never verified, and the first three are not done at all. Real toolbox, sandbox and workspace;
an in-process stand-in for the checker model (the same checks run over the bus in
test_outcomes_e2e.py)."""
from __future__ import annotations

import shlex

import pytest

from protocol.messages import Criterion, Referent, RunOptions, SubTask, ToolCallRecord
from services.roles.agentval import AgentValidator
from services.roles.executor import Executor
from services.roles.verifier import Verifier
from services.safety import record, referents
from services.safety.tools import Toolbox

from test_effector_units import FakeLLM
from test_law0 import VERIFIERS, no_leftover_copies, result, run  # noqa: F401 (fixture)


def validator(settings, goal: str, *derivations, subtask_id: str = "st-1"):
    refs = referents.resolve(goal, str(settings.workspace))
    st = SubTask(subtask_id=subtask_id, parent_task_id="run-out", intent=goal, goal=goal,
                 success_criteria=[Criterion(text="the goal is achieved")], options=RunOptions(),
                 referents=[Referent.model_validate(r.as_dict()) for r in refs])
    verifier = Verifier(st, FakeLLM(*derivations), settings)
    verifier.start()
    VERIFIERS[-1].append(verifier)
    return AgentValidator(st, FakeLLM(local=True), settings, verifier=verifier)


def test_a_failed_commands_error_as_the_answer_is_not_done(settings):
    ws = settings.workspace
    (ws / "data.txt").write_text("x\n")
    av = validator(settings, "Copy data.txt to backup/data.txt")
    cp = run(settings, "cp data.txt backup/data.txt")
    assert cp.error
    j = av.judge(result([cp], cp.output or cp.error))
    assert j.kind == "retry" and "error" in j.correction.what_was_wrong
    j = av.judge(result([cp], "cp: cannot create regular file: No such file or directory",
                        attempt=2))
    assert j.kind == "failed" and not j.outcome.verified
    assert not (ws / "backup" / "data.txt").exists()


def test_a_file_the_goal_makes_must_exist(settings):
    (settings.workspace / "guests.txt").write_text("ann\nbob\nann\n")
    av = validator(settings, "Write the names in guests.txt without repeats to unique.txt")
    j = av.judge(result([run(settings, "sort -u guests.txt")], "ann\nbob"))
    assert j.kind == "retry" and "unique.txt" in j.correction.what_was_wrong


def test_a_file_made_in_another_folder_than_the_goal_names_is_not_done_and_says_where(settings):
    # the model wrote drafts/groceries.txt for "groceries.txt": the correction says where it
    # wrote, and that the goal's path starts at the top of the workspace
    (settings.workspace / "drafts").mkdir()
    av = validator(settings, "Create a file named groceries.txt containing the line: milk")
    j = av.judge(result([run(settings, "echo milk > drafts/groceries.txt")], "done"))
    assert j.kind == "retry", j
    assert "there is drafts/groceries.txt; the goal names groceries.txt, a path from the top " \
        "of the workspace" in j.correction.what_was_wrong
    assert not (settings.workspace / "groceries.txt").exists()
    # the source of a copy is no misplaced output
    (settings.workspace / "notes").mkdir()
    (settings.workspace / "notes" / "todo.txt").write_text("milk\n")
    goal = "Back up notes/todo.txt as backup/todo.txt"
    refs = referents.resolve(goal, str(settings.workspace))
    assert record.undelivered(refs, str(settings.workspace), goal) == \
        ["the file backup/todo.txt the goal asks for does not exist"]


def test_a_file_holding_only_nan_is_not_done(settings):
    """dev avg-200-latency: awk selected no line (`$3 == "200"` on the method's field) and wrote
    its mean of nothing, `-nan`, to avg_200.txt; no check could derive the value, and it ended
    "done, but not verified". NaN or infinity is what arithmetic prints over no values: the
    attempt failed, and the correction says the selection matched nothing."""
    (settings.workspace / "api.log").write_text("GET /a 200 120\nGET /b 500 80\n")
    goal = "Write the average time of the requests that came back 200 in api.log to avg.txt"
    av = validator(settings, goal)
    work = "awk '$2 == \"200\" {s += $4; n++} END {print s / n}' api.log > avg.txt"
    j = av.judge(result([run(settings, work)], "done"))
    assert (settings.workspace / "avg.txt").read_text().strip() in ("-nan", "nan", "inf")
    assert j.kind == "retry" and "the selection matched nothing" in \
        j.correction.what_was_wrong, j
    (settings.workspace / "avg.txt").write_text("120\n")
    refs = referents.resolve(goal, str(settings.workspace))
    assert record.undelivered(refs, str(settings.workspace), goal) == []


def test_a_line_appended_to_a_file_without_a_final_newline_is_not_done(settings):
    # "milk" with no newline at its end: `echo bread >>` makes "milkbread", and a check that
    # appends the same way agrees; code sees the glued line from the before-copy
    (settings.workspace / "groceries.txt").write_text("milk")
    goal = "Append the line 'bread' to groceries.txt"
    av = validator(settings, goal, {"output_file": "", "command": "echo bread >> groceries.txt"})
    j = av.judge(result([run(settings, "echo bread >> groceries.txt")], "done"))
    assert j.kind == "retry", j
    assert "joined its last line ('milkbread')" in j.correction.what_was_wrong
    # the retry edits the original, not the failed result: a right append is no joined line
    # (and this check, appending the same wrong way, is no check of it: done, not verified)
    assert (settings.workspace / "groceries.txt").read_text() == "milk"
    assert "groceries.txt were undone" in j.correction.what_to_do
    # the correction spells out the command that appends it right, which fixes the file
    todo = j.correction.what_to_do
    assert "reply COMMAND: printf '\\n%s\\n' bread >> groceries.txt ," in todo, todo
    assert j.correction.fix_command == "printf '\\n%s\\n' bread >> groceries.txt"
    fix = run(settings, todo.split("COMMAND: ", 1)[1].split(" ,", 1)[0])
    j = av.judge(result([fix], "done", attempt=2))
    assert (settings.workspace / "groceries.txt").read_text() == "milk\nbread\n"
    assert j.kind == "matched" and not j.outcome.verified, j
    assert "is no check" in str(av.law0.unverified), av.law0
    assert j.outcome.changed == ["groceries.txt"]
    (settings.workspace / "g2.txt").write_text("milk\n")
    ok = validator(settings, "Append the line 'bread' to g2.txt",
                   {"output_file": "", "command": "echo bread >> g2.txt"})
    j = ok.judge(result([run(settings, "echo bread >> g2.txt")], "done"))
    assert j.kind != "retry" or "joined" not in j.correction.what_was_wrong, j
    assert record.glued(str(settings.workspace), str(settings.workspace), ["g2.txt"]) == []


def test_a_check_that_joins_a_line_is_no_check_of_work_that_did_not(settings):
    # dev append-user-row at 1f62037: the executor added the row after a newline, right; the
    # check's program appended onto the last line ("viewerusername,…") and failed the right
    # file, which was undone. The slip code rejects in the work makes a check no check: one in
    # the other form stands in for it, and confirms the file
    (settings.workspace / "groceries.txt").write_text("milk\neggs")
    goal = "Add bread as a new line at the end of groceries.txt"
    glues = "FILE: {0}\nPYTHON:\nopen('{0}', 'a').write('bread\\n')"
    av = validator(settings, goal, glues.format("groceries.txt"),
                   {"output_file": "groceries.txt", "command": "cat groceries.txt; echo; echo bread"},
                   "FILE: groceries.txt\nPYTHON:\nprint(open('groceries.txt').read().rstrip() "
                   "+ '\\nbread')")
    j = av.judge(result([run(settings, "printf '\\nbread\\n' >> groceries.txt")], "done"))
    assert j.kind == "matched" and j.outcome.verified, (j, av.law0)
    assert (settings.workspace / "groceries.txt").read_text() == "milk\neggs\nbread\n"
    assert any("joined a line" in c for c in av.law0.checks), av.law0.checks
    # no stand-in that derives it: the file is done, unverified — never failed on that check
    (settings.workspace / "g2.txt").write_text("milk\neggs")
    av = validator(settings, "Add bread as a new line at the end of g2.txt", glues.format("g2.txt"))
    j = av.judge(result([run(settings, "printf '\\nbread\\n' >> g2.txt")], "done"))
    assert j.kind == "matched" and not j.outcome.verified, j
    assert "is no check" in str(av.law0.unverified), av.law0


def test_a_change_goals_check_that_joins_a_line_is_no_check_and_a_query_can_stand_in(settings):
    # dev append-user-row at 65612b9: the check named no file, so its program appended to a
    # copy of the workspace — onto the last line, which had no newline — and the right row
    # failed against that copy until the task was abandoned with the row in place. The slip
    # makes the copy no check; a query's INSERT, which derives the one file the goal changes,
    # stands in (and, after a right program, confirms it)
    before = "username,email,role\nanna,anna@example.com,admin\ndmitri,dmitri@example.com,viewer"
    goal = ("Add a row for a new user to the end of {}: username carol, email "
            "carol@example.com, role editor.")
    insert = ("FILE: {}\nSQL: INSERT INTO {} (username, email, role) VALUES "
              "('carol', 'carol@example.com', 'editor')")
    work = "printf '\\n%s\\n' carol,carol@example.com,editor >> {}"
    glues = ("FILE: none\nPYTHON:\nimport csv\nwith open('{}', 'a', newline='') as f:\n"
             "    csv.writer(f, lineterminator='\\n').writerow(['carol', 'carol@example.com', "
             "'editor'])")
    reads = ("FILE: {0}\nPYTHON:\nprint(open('{0}').read().rstrip() + "
             "'\\ncarol,carol@example.com,editor')")
    (settings.workspace / "members.csv").write_text(before)
    av = validator(settings, goal.format("members.csv"), glues.format("members.csv"),
                   insert.format("members.csv", "members"), reads.format("members.csv"))
    j = av.judge(result([run(settings, work.format("members.csv"))], "done"))
    assert (settings.workspace / "members.csv").read_text() == \
        before + "\ncarol,carol@example.com,editor\n"
    assert j.kind == "matched" and j.outcome.verified, (j, av.law0)
    assert any("joined a line" in c for c in av.law0.checks), av.law0.checks
    assert j.outcome.changed == ["members.csv"]
    # a right program's copy first: the query, deriving only the file it changes, confirms
    (settings.workspace / "staff.csv").write_text(before)
    appends = ("FILE: none\nPYTHON:\nopen('staff.csv', 'a')"
               ".write('\\ncarol,carol@example.com,editor\\n')")
    av = validator(settings, goal.format("staff.csv"), appends, insert.format("staff.csv", "staff"))
    j = av.judge(result([run(settings, work.format("staff.csv"))], "done"))
    assert j.kind == "matched" and j.outcome.verified, (j, av.law0)
    assert any("a second check in another form agrees" in c for c in [av.law0.evidence]), av.law0
    # a query whose table is not what the work made does not confirm it
    (settings.workspace / "crew.csv").write_text(before)
    wrong = ("FILE: crew.csv\nSQL: INSERT INTO crew (username, email, role) VALUES "
             "('carol', 'carol@example.com', 'viewer')")
    av = validator(settings, goal.format("crew.csv"), appends.replace("staff", "crew"), wrong)
    j = av.judge(result([run(settings, work.format("crew.csv"))], "done"))
    assert not (j.kind == "matched" and j.outcome.verified), (j, av.law0)


def test_work_code_proved_wrong_is_put_back_when_the_subtask_ends(settings):
    # every attempt glues the line: the subtask fails, and the user's file comes back as it was
    # (a next round starts from it, not from the glued line); the failure reason says so
    (settings.workspace / "groceries.txt").write_text("milk")
    av = validator(settings, "Append the line 'bread' to groceries.txt",
                   {"output_file": "", "command": "echo bread >> groceries.txt"})
    glue = "echo bread >> groceries.txt"
    assert av.judge(result([run(settings, glue)], "done")).kind == "retry"
    # the last attempt's flaw has a fix code knows: one more attempt, once per subtask
    j = av.judge(result([run(settings, glue)], "done", attempt=2))
    assert j.kind == "retry" and j.correction.fix_command, j
    j = av.judge(result([run(settings, glue)], "done", attempt=3))
    assert j.kind == "failed" and "put back as before the work: groceries.txt" in \
        j.outcome.failure_reason, j.outcome.failure_reason
    assert (settings.workspace / "groceries.txt").read_text() == "milk"
    assert j.outcome.changed == []     # put back: the task leaves nothing changed


def test_a_file_a_rejected_round_wrote_is_not_a_later_rounds_work(settings):
    # round 1 wrote a wrong lines.txt, which its check refuted twice; round 2 ran a command
    # that changed nothing and said done: the file is no state of the user's, and not this
    # round's work — not done, whatever round 2's check could derive
    (settings.workspace / "colours.md").write_text("red\ngreen\nblue\n")
    goal = "Count the lines of colours.md and write the number to lines.txt"
    check = {"output_file": "lines.txt", "command": "grep -c '' colours.md"}
    wrong = "echo 7 > lines.txt"
    first = validator(settings, goal, check, subtask_id="st-round1")
    assert first.judge(result([run(settings, wrong)], "done")).kind == "retry"
    j = first.judge(result([run(settings, wrong)], "done", attempt=2))
    assert j.kind == "failed"
    assert (settings.workspace / "lines.txt").read_text() == "7\n"
    later = validator(settings, goal, {"output_file": "lines.txt", "command": "cat nope.txt"},
                      subtask_id="st-round2")
    j = later.judge(result([run(settings, "ls")], "done"))
    assert j.kind == "retry" and "earlier, rejected round of this task wrote" in \
        j.correction.what_was_wrong, j
    # a round that writes the file itself is judged on what it wrote
    from services.roles.programs import python_command
    write = python_command("open('lines.txt', 'w').write(f\"{len(open('colours.md').readlines())}\\n\")")
    j = later.judge(result([run(settings, write)], "done", attempt=2))
    assert (settings.workspace / "lines.txt").read_text() == "3\n"
    assert "rejected round" not in (j.outcome.failure_reason or ""), j.outcome


def test_what_an_earlier_rounds_check_derived_still_contradicts_the_answer(settings):
    # round 1's check counted the ERROR entries (2) and refuted 3 twice; round 2's check could
    # not run, and its answer was the same 3: "done, but not verified" and wrong, until the
    # evidence round 1 gathered on the same inputs reached round 2's checks
    (settings.workspace / "app.log").write_text("INFO a\nERROR b\nINFO c\nERROR d\n"
                                                "INFO retry after ERROR\n")
    goal = "How many entries in app.log have the level ERROR?"
    count = "grep -c ERROR app.log"
    first = validator(settings, goal, {"output_file": "", "command": "awk '$1 == \"ERROR\"' "
                                       "app.log | wc -l"}, subtask_id="st-round1")
    assert first.judge(result([run(settings, count)], "3")).kind == "retry"
    assert first.judge(result([run(settings, count)], "3", attempt=2)).kind == "failed"
    later = validator(settings, goal, {"output_file": "", "command": "cat nope.txt"},
                      {"output_file": "", "command": "cat nope.txt"}, subtask_id="st-round2")
    j = later.judge(result([run(settings, count)], "3"))
    assert j.kind == "retry", j
    assert "an independent check an earlier round of this task ran" in \
        j.correction.what_was_wrong and "printed 2" in j.correction.what_was_wrong, j.correction
    # an answer that lists that value among others is a list of candidates, not the answer (dev
    # section-timeout at f0b4f41: round 2 answered "30 5 45 300" for one section's timeout)
    spray = validator(settings, goal, {"output_file": "", "command": "cat nope.txt"},
                      {"output_file": "", "command": "cat nope.txt"}, subtask_id="st-round3")
    listed = run(settings, "awk '$1 == \"ERROR\"' app.log | wc -l; grep -c INFO app.log; "
                           "wc -l < app.log")
    j = spray.judge(result([listed], "2\n3\n5"))
    assert j.kind == "retry" and "lists among other values" in j.correction.what_was_wrong, j
    # another goal on the same files is another question: round 1's check says nothing of it
    other = validator(settings, "How many lines does app.log have?",
                      {"output_file": "", "command": "cat nope.txt"},
                      {"output_file": "", "command": "cat nope.txt"}, subtask_id="st-other")
    j = other.judge(result([run(settings, "wc -l < app.log")], "5"))
    assert j.kind == "matched" and not j.outcome.verified, j


SPENDER_GOAL = "Which customer in orders.csv spent the most in total?"
# a wrong first check: the largest single order, not the largest total
SPENDER_WRONG = {"output_file": "", "command": "sort -t, -k2 -n orders.csv | tail -1 | cut -d, -f1"}
SPENDER_PY = ("python3 -c 'import csv, collections\nt = collections.Counter()\n"
              "for r in csv.DictReader(open(\"orders.csv\")): t[r[\"customer\"]] += "
              "float(r[\"amount\"])\nprint(t.most_common(1)[0][0])'")
SPENDER_AWK = "awk -F, 'NR > 1 {t[$1] += $2} END {for (c in t) print t[c] \"\\t\" c}' " \
              "orders.csv | sort -n | tail -1 | cut -f2"


@pytest.mark.parametrize("second, kind", [
    ("FILE: none\nSQL: SELECT customer FROM orders GROUP BY customer ORDER BY SUM(amount) DESC "
     "LIMIT 1", "matched"),
    ("FILE: none\nSQL: SELECT customer FROM orders ORDER BY amount DESC LIMIT 1", "failed")])
def test_an_answer_the_executor_stands_by_against_one_check_is_decided_by_another(
        settings, second, kind):
    # dev biggest-spender at ea1ad81: the executor derived the right name twice, by two
    # programs, and one wrong first check failed both. The same answer derived again after the
    # correction showed that check is a second derivation against one: a check in the other
    # form decides. It agrees: done, never verified (the checks disagree). It sides with the
    # first check: the failure stands.
    (settings.workspace / "orders.csv").write_text(
        "customer,amount\nHannah Weber,60\nBob Stone,100\nHannah Weber,70\nCara Lind,20\n")
    av = validator(settings, SPENDER_GOAL, SPENDER_WRONG, second)
    j = av.judge(result([run(settings, SPENDER_PY)], "Hannah Weber"))
    assert j.kind == "retry" and "Bob Stone" in j.correction.what_was_wrong, j
    j = av.judge(result([run(settings, SPENDER_AWK)], "Hannah Weber", attempt=2))
    assert j.kind == kind, j
    assert not j.outcome.verified
    if kind == "matched":
        assert "the checks disagree" in str(av.law0.unverified), av.law0
    else:
        assert "a second check in the other form printed: Bob Stone" in av.law0.evidence, av.law0


SPENDER_MAX = ("import csv\nbest, who = 0.0, ''\nfor r in csv.DictReader(open('orders.csv')):\n"
               "    if float(r['amount']) > best:\n        best, who = float(r['amount']), "
               "r['customer']\nprint(who)")


def test_an_agreement_on_a_misleading_reading_contradicted_by_the_one_independent_check_is_not_done(
        settings):
    # dev biggest-spender at 59d3618: the executor and the first check both took the largest
    # single order (customer repeats: per record is not per customer), and the GROUP BY query
    # printed the largest total. The agreement was no evidence and the one independent check
    # contradicts it: not done, and the correction shows that check (it was "done, but not
    # verified", wrong)
    (settings.workspace / "orders.csv").write_text(
        "customer,amount\nHannah Weber,60\nBob Stone,100\nHannah Weber,70\nCara Lind,20\n")
    av = validator(settings, SPENDER_GOAL, f"FILE: none\nPYTHON:\n{SPENDER_MAX}",
                   "FILE: none\nSQL: SELECT customer FROM orders GROUP BY customer "
                   "ORDER BY SUM(amount) DESC LIMIT 1")
    mine = SPENDER_MAX.replace("best, who", "top, name").replace("best", "top") \
        .replace("who", "name")
    j = av.judge(result([run(settings, f"python3 -c {shlex.quote(mine)}")], "Bob Stone"))
    assert j.kind == "retry", (j, av.law0)
    assert "Hannah Weber" in j.correction.what_was_wrong, j.correction


def test_a_repeated_answer_copied_from_nothing_new_is_not_a_second_derivation(settings):
    # the answer again, but this attempt ran no command of its own that prints it: no third
    # check is asked (no derivation left to script), and the failure stands
    (settings.workspace / "orders.csv").write_text(
        "customer,amount\nHannah Weber,60\nBob Stone,100\nHannah Weber,70\nCara Lind,20\n")
    av = validator(settings, SPENDER_GOAL, SPENDER_WRONG)
    assert av.judge(result([run(settings, SPENDER_PY)], "Hannah Weber")).kind == "retry"
    j = av.judge(result([run(settings, "cat orders.csv")], "Hannah Weber", attempt=2))
    assert j.kind == "failed" and not j.outcome.verified, j


COLOURS_GOAL = "Count the lines of colours.md and write the number to lines.txt"
COLOURS_CHECK = {"output_file": "lines.txt", "command": "grep -c '' colours.md"}


def colours_validator(settings):
    """R4a on "count the lines of colours.md into lines.txt", with both derivations scripted."""
    (settings.workspace / "colours.md").write_text("red\ngreen\nblue\n")
    return validator(settings, COLOURS_GOAL, COLOURS_CHECK, "FILE: lines.txt\nPYTHON:\n"
                     "print(len(open('colours.md').read().splitlines()))")


def test_a_result_printed_instead_of_written_is_told_the_command_that_writes_it(settings):
    # the executor printed the right count and never wrote the file: the correction gives the
    # command that writes what it printed, and the file it writes is then checked as any other
    av = colours_validator(settings)
    j = av.judge(result([run(settings, "wc -l < colours.md")], "3"))
    assert j.kind == "retry", j
    todo = j.correction.what_to_do
    assert "printf '%s\\n' 3 > lines.txt" in todo, todo
    assert j.correction.fix_command == "printf '%s\\n' 3 > lines.txt", j.correction
    # the executor runs the fix code composed without asking its model (no reply is queued)
    llm = FakeLLM(local=True)
    ex = Executor(av.subtask, llm, Toolbox(settings), settings)
    fixed = ex.run_attempt(2, j.correction)
    assert llm.prompts == [] and fixed.status == "completed", fixed
    assert [c.target for c in fixed.tool_calls] == ["printf '%s\\n' 3 > lines.txt"]
    j = av.judge(fixed)
    assert (settings.workspace / "lines.txt").read_text() == "3\n"
    assert j.kind == "matched", j
    # a value no command printed is never offered for writing, nor the goal's own words (an
    # answer that names the deliverable is no result: dev copy-into-new-folder at ea1ad81)
    (settings.workspace / "lines.txt").unlink()
    av = validator(settings, COLOURS_GOAL, COLOURS_CHECK)
    j = av.judge(result([run(settings, "wc -l < colours.md")], "7"))
    assert j.kind == "retry" and "printf" not in j.correction.what_to_do, j.correction
    assert j.correction.fix_command == ""
    j = av.judge(result([run(settings, "cat colours.md")], "lines.txt", attempt=2))
    assert j.correction is None or j.correction.fix_command == "", j.correction
    assert j.kind == "failed" and not (settings.workspace / "lines.txt").exists(), j


def test_a_fix_code_knows_gets_one_attempt_beyond_the_last(settings):
    # both attempts printed the count and never wrote the file: the last one's flaw has a fix
    # code composed, so one more attempt runs it (no model call), once per subtask
    av = colours_validator(settings)
    assert av.max_attempts == 2
    assert av.judge(result([run(settings, "wc -l < colours.md")], "3")).kind == "retry"
    j = av.judge(result([run(settings, "grep -c '' colours.md")], "3", attempt=2))
    assert j.kind == "retry" and j.correction.fix_command, j
    fixed = Executor(av.subtask, FakeLLM(local=True), Toolbox(settings), settings).run_attempt(
        3, j.correction)
    j = av.judge(fixed)
    assert j.kind == "matched" and (settings.workspace / "lines.txt").read_text() == "3\n", j
    # a flaw without a known fix at the last attempt fails the subtask, as before
    av = validator(settings, "Count the lines of colours.md and write the number to n.txt",
                   COLOURS_CHECK)
    assert av.judge(result([run(settings, "wc -l < colours.md")], "7")).kind == "retry"
    assert av.judge(result([run(settings, "wc -l < colours.md")], "7", attempt=2)).kind == \
        "failed"


def test_a_first_check_that_prints_the_name_of_the_file_it_counted_agrees(settings):
    # `wc -l colours.md` prints "3 colours.md" for the 3 the file holds: the check's way of
    # printing, not a contradiction; the second check must derive the content exactly
    from services.roles.programs import python_command
    (settings.workspace / "colours.md").write_text("red\ngreen\nblue\n")
    goal = "Count the lines of colours.md and write the number to lines.txt"
    second = ("FILE: lines.txt\nPYTHON:\nprint(len(open('colours.md').read().splitlines()))")
    write = python_command("n = len(open('colours.md').read().splitlines())\n"
                           "open('lines.txt', 'w').write(f'{n}\\n')")
    av = validator(settings, goal, {"output_file": "lines.txt", "command": "wc -l colours.md"},
                   second)
    j = av.judge(result([run(settings, write)], "done"))
    assert (settings.workspace / "lines.txt").read_text() == "3\n"
    assert j.kind == "matched" and j.outcome.verified, j.outcome
    # both checks printing the name with the value: the second one does not agree
    (settings.workspace / "lines.txt").unlink()
    av = validator(settings, goal, {"output_file": "lines.txt", "command": "wc -l colours.md"},
                   "FILE: lines.txt\nCOMMAND: grep -c '' colours.md /dev/null")
    j = av.judge(result([run(settings, write)], "done"))
    assert j.kind == "matched" and not j.outcome.verified, j.outcome


def test_not_possible_for_a_file_to_make_from_inputs_that_exist_is_not_done(settings):
    """The goal makes backup/todo.txt from notes/todo.txt, which exists: an executor that
    replies NOT POSSIBLE (after a command that failed) has not done it, whatever the checks
    could or could not run; only a missing input could make the goal impossible."""
    (settings.workspace / "notes").mkdir()
    (settings.workspace / "notes" / "todo.txt").write_text("buy milk\n")
    av = validator(settings, "Back up notes/todo.txt as backup/todo.txt (the backup folder "
                             "doesn't exist yet)")
    failed = run(settings, "cp notes/todo.txt backup/todo.txt")
    j = av.judge(result([failed], "No such file or directory", status="not_possible"))
    assert j.kind == "retry" and "backup/todo.txt" in j.correction.what_was_wrong
    # a missing input is another matter: then "not possible" may be the answer
    av = validator(settings, "Back up notes/done.txt as backup/done.txt")
    refs = referents.coerce(av.subtask.referents)
    assert not record.inputs_present(refs)


def test_nothing_found_for_what_the_workspace_holds_is_not_done(settings):
    (settings.workspace / "server.log").write_text("INFO start\nWARN disk \"low space\"\n")
    av = validator(settings, 'Which line of server.log mentions "low space"?')
    grep = run(settings, "grep -i 'low  space' server.log")
    j = av.judge(result([grep], "nothing found", status="not_possible"))
    assert j.kind == "retry" and "server.log" in j.correction.what_was_wrong


def test_a_longer_name_the_goal_itself_names_is_no_near_match(settings):
    # "Back up … as backup/todo.txt": `back` is no word of the workspace, and the work reads
    # `backup` — which the goal names too, so it read what the goal names (dev
    # copy-into-new-folder at ea1ad81 was failed for reading 'backup' instead of 'back')
    (settings.workspace / "notes").mkdir()
    (settings.workspace / "notes" / "todo.txt").write_text("buy milk\n")
    (settings.workspace / "backup").mkdir()        # an earlier round's work
    (settings.workspace / "backup" / "todo.txt").write_text("backup/todo.txt\n")
    goal = "Back up notes/todo.txt as backup/todo.txt (the backup folder doesn't exist yet)."
    refs = referents.resolve(goal, str(settings.workspace))
    assert referents.misread(refs, ["cp notes/todo.txt backup/todo.txt"], goal=goal,
                             root=str(settings.workspace)) == []
    # nor is a name made of the goal's words (dev failed-login-days at ea1ad81: "failed login
    # attempts" reading LOGIN_FAILED was failed as a misread of 'login')
    (settings.workspace / "auth.log").write_text("2024-05-01T10:00:00 LOGIN_FAILED user=ann\n")
    goal = "Write the days with a failed login attempt in auth.log to failed_days.txt"
    refs = referents.resolve(goal, str(settings.workspace))
    assert referents.misread(refs, ["grep LOGIN_FAILED auth.log | cut -c1-10"], goal=goal,
                             root=str(settings.workspace)) == []
    # a longer name the goal does not name is still a near match of its word
    (settings.workspace / "ratings.csv").write_text("ratings_count\n3\n")
    goal = "What is the average rating in ratings.csv?"
    refs = referents.resolve(goal, str(settings.workspace))
    assert referents.misread(refs, ["awk -F, '{print $ratings_count}' ratings.csv"], goal=goal,
                             root=str(settings.workspace)), refs
    # a name whose every word is the goal's, units and other short parts aside, is what the
    # goal names; one with a word the goal does not say (p95 for p99) is a near match
    (settings.workspace / "m.json").write_text('{"latency_p50_ms": 42, "latency_p95_ms": 181}')
    for goal, read, wrong in (("What was the worst p50 latency in m.json?", "latency_p50_ms", False),
                              ("What was the worst p99 latency in m.json?", "latency_p95_ms", True)):
        refs = referents.resolve(goal, str(settings.workspace))
        assert bool(referents.misread(refs, [f"jq .{read} m.json"], goal=goal,
                                      root=str(settings.workspace))) is wrong, goal


def test_work_that_read_a_sibling_of_the_named_file_is_not_done(settings):
    from test_law0 import require_sandbox
    require_sandbox(settings, "the second check in another form is a program")
    ws = settings.workspace
    (ws / "report_2022.txt").write_text("a\nb\nc\n")
    (ws / "report_2024.txt").write_text("a\nb\nc\nd\ne\n")
    av = validator(settings, "How many lines are in report_2024.txt?",
                   {"output_file": "", "command": "grep -c . report_2022.txt"},
                   "FILE: none\nPYTHON:\nprint(len(open('report_2022.txt').readlines()))")
    j = av.judge(result([run(settings, "wc -l < report_2022.txt")], "3"))
    assert j.kind == "retry" and "report_2022.txt" in j.correction.what_was_wrong
    j = av.judge(result([run(settings, "wc -l < report_2022.txt")], "3", attempt=2))
    assert j.kind == "failed" and not j.outcome.verified
    assert "report_2022.txt" in j.outcome.failure_reason


@pytest.mark.parametrize("answer, why", [
    ("Traceback (most recent call last):\n  File \"<string>\", line 1", "error"),
    ("import csv\nprint(sum(1 for r in csv.reader(open('a.csv'))))", "code"),
    ("grep -c ERROR app.log", "code"),
    ("bash: jq: command not found", "error"),
    ("-nan", "over no values"), ("inf", "over no values"), ("NaN", "over no values"),
])
def test_not_a_value(answer, why):
    assert why in record.not_a_value(answer, [])


@pytest.mark.parametrize("answer", ["42", "Alice, Bob", "2024-05-02", "a.txt", "3.5 MB",
                                    "done: created out.txt", "Oslo (Norway)", "max: 17",
                                    "largest=b.txt-2048", "total = 42"])
def test_values_are_values(answer):
    assert record.not_a_value(answer, [ToolCallRecord(tool="shell", error="exit 1",
                                                      output="grep: x: No such file")]) == ""


# -- confirming more right answers (k-of-N on the checker) --------------------------------------

COUNT_ERRORS_PY = "FILE: none\nPYTHON:\nprint(sum(l.split()[0] == 'ERROR' for l in open('app.log')))"


@pytest.fixture
def applog(settings):
    (settings.workspace / "app.log").write_text("INFO a\nERROR b\nINFO c ERROR\nERROR d\n")
    return settings.workspace


def test_an_independent_second_check_confirms_what_an_echoing_first_check_could_not(
        settings, applog):
    """The first check ran the executor's own method (no evidence); a second one in the other
    form, reading the data another way, agrees: verified. Had it read the data the executor's
    way, it would not count (test_law0: the same program twice on 'Shipped' data)."""
    from test_law0 import require_sandbox
    require_sandbox(settings, "the second check in another form is a program")
    av = validator(settings, "How many log entries in app.log have the level ERROR?",
                   {"output_file": "", "command": "grep -c '^ERROR' app.log"}, COUNT_ERRORS_PY)
    j = av.judge(result([run(settings, "grep -c '^ERROR' app.log")], "2"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome.unverified
    assert not j.outcome.unverified


@pytest.mark.parametrize("resample, verified", [
    ({"output_file": "", "command": "cut -d' ' -f1 app.log | grep -cx ERROR"}, True),
    ({"output_file": "", "command": "awk '$1==\"ERROR\"' app.log | wc -l"}, False),  # as check 1
])
def test_a_check_that_could_not_run_is_resampled_once(settings, applog, resample, verified):
    """The second check in the other form fails to run, and again when asked once more: one
    more sample in the first form stands in for it, only if it reads the data otherwise than
    the first check."""
    from test_law0 import require_sandbox
    require_sandbox(settings, "the second check in another form is a program")
    crash = "FILE: none\nPYTHON:\nprint(undefined_name)"
    av = validator(settings, "How many log entries in app.log have the level ERROR?",
                   {"output_file": "", "command": "awk '$1==\"ERROR\"' app.log | wc -l"},
                   crash, crash, resample)
    j = av.judge(result([run(settings, "python3 -c \"print(sum(1 for l in open('app.log') "
                                       "if l.startswith('ERROR ')))\"")], "2"))
    assert j.kind == "matched" and j.outcome.verified is verified, j.outcome.unverified
    if not verified:
        assert any("first check's way" in u for u in j.outcome.unverified)


@pytest.mark.parametrize("again", [False, True])
def test_the_main_jobs_goal_is_confirmed_by_a_check_that_computes_the_date(settings, again):
    """The main job's goal: the executor and the first check both echo the date the prompt
    showed (one method: no evidence); a second check, a program that computes today's date and
    writes the file (then prints a listing), is independent and agrees: verified. The file it
    wrote is its derivation, not the listing it printed — also when the job runs `again` and
    today.txt already holds the date, so the program writes what was there (the second run of
    `bash scripts/main` on a machine ended "done, but not verified", exit 3, on the listing)."""
    import time as _time
    from test_law0 import require_sandbox
    require_sandbox(settings, "the second check in another form is a program")
    today = _time.strftime("%Y-%m-%d")
    if again:
        (settings.workspace / "today.txt").write_text(today)
    av = validator(settings, "Write a file named today.txt in the workspace containing today's "
                             "date (YYYY-MM-DD), then list the workspace",
                   f'FILE: today.txt\nCOMMAND: echo "{today}" > today.txt',
                   "FILE: today.txt\nPYTHON:\nimport datetime, os\nwith open('today.txt', 'w') "
                   "as f:\n    f.write(datetime.date.today().isoformat())\n"
                   "print(os.listdir('.'))")
    j = av.judge(result([run(settings, "touch today.txt" if again else
                             f'echo "{today}" > today.txt')], "(no output)"))
    assert j.kind == "matched" and j.outcome.verified, j.outcome.unverified
    assert (settings.workspace / "today.txt").read_text().strip() == today


def test_a_value_read_from_the_named_file_the_prompt_showed_whole_is_no_value_from_nowhere(
        settings):
    """The executor's prompt shows a small file the goal names whole (overview.py): a value
    read there has a source, like a tool's output, even when the executor's own program
    failed; the independent checks still decide "verified". A value the file does not hold
    stays a value from nowhere."""
    from services.safety import overview
    from test_law0 import require_sandbox
    require_sandbox(settings, "the second check in another form is a program")
    (settings.workspace / "config").mkdir()
    (settings.workspace / "config" / "app.ini").write_text(
        "[database]\nport = 5432\n\n[server]\nhost = 0.0.0.0\nport = 8080\n")
    for i in range(60):        # a listing longer than any overview budget
        (settings.workspace / f"note_{i:02d}_with_a_long_name.txt").write_text("x\n")
    shown = overview.workspace(str(settings.workspace), budget=200, whole=["config/app.ini"])
    assert "--- config/app.ini (whole):" in shown and "port = 8080" in shown
    goal = "According to config/app.ini, which port does the web server listen on?"
    crash = run(settings, "python3 -c \"print(open('config/app.ini').read().split('=')[9])\"")
    assert "IndexError" in crash.output + crash.error
    first = {"output_file": "", "command": "grep -A3 '^\\[server\\]' config/app.ini | "
                                           "grep '^port' | cut -d= -f2"}
    second = ("FILE: none\nPYTHON:\nimport configparser\nc = configparser.ConfigParser()\n"
              "c.read('config/app.ini')\nprint(c['server']['port'])")
    av = validator(settings, goal, first, second)
    j = av.judge(result([crash], "8080"))
    assert j.kind == "matched" and j.outcome.verified, (j.kind, j.outcome, j.correction)
    av = validator(settings, goal, first, second)
    j = av.judge(result([crash], "9090"))
    assert j.kind == "retry" and "no tool output" in j.correction.what_was_wrong


def test_the_gates_approval_note_is_no_answer(settings):
    # a delete approved by --yes prints nothing; the gate's note before it ("[approved by --yes;
    # undo copy kept …]") was taken for the one line the command printed, and became the answer
    # the user saw (dev delete-empty-files at ea1ad81); what changed is said instead
    from protocol.messages import Criterion, RunOptions, SubTask
    from services.roles.law0report import SILENT_WRITE
    from services.safety import law1
    from services.safety.tools import approval_note
    (settings.workspace / "tmp").mkdir()
    (settings.workspace / "tmp" / "empty.log").write_text("")
    (settings.workspace / "tmp" / "full.log").write_text("x\n")
    goal = "Delete every empty file in the tmp folder"
    st = SubTask(subtask_id="st-1", parent_task_id="run-out", intent=goal, goal=goal,
                 success_criteria=[Criterion(text="deleted")], options=RunOptions())
    yes = Toolbox(settings, approve=lambda **_: law1.Decision(True, "--yes", "pre-approved"))
    done = Executor(st, FakeLLM("COMMAND: find tmp -type f -empty -delete", local=True), yes,
                    settings).run_attempt(1)
    assert "[approved by --yes" in done.tool_calls[0].output, done.tool_calls
    assert done.output == SILENT_WRITE, done.output
    assert not (settings.workspace / "tmp" / "empty.log").exists()
    assert approval_note("[approved by --yes; undo copy kept for 1 path(s)]")
    assert not approval_note("[1, 2]") and not approval_note("approved by --yes")
    # R4a then says what changed: the placeholder is no answer of its own
    from services.roles.filecheck import raw
    assert raw(SILENT_WRITE, [])


def test_a_check_that_names_the_made_file_bare_means_where_the_goal_put_it(settings):
    """dev books-md-table at 1d14656: the goal makes lists/books.md ("right next to"
    lists/books.csv) and the executor wrote it there; the check named `books.md` and its program
    wrote books.md at the top of its copy. Judged against the bare name, the work was "missing
    books.md" and the retry wrote one at the top. The check's FILE is where the goal's resolution
    put that name, and what its program wrote under the bare name is its derivation all the
    same."""
    from services.safety import sandbox
    if sandbox.status(settings).mode != "bubblewrap":
        pytest.skip("the check is a program run on a scratch copy in the sandbox")
    ws = settings.workspace
    (ws / "lists").mkdir()
    (ws / "lists" / "books.csv").write_text("title,year\nDune,1965\nEmma,1815\n")
    goal = ("take the titles from lists/books.csv and save them right next to it as titles.txt, "
            "one per line")
    assert referents.to_make(validator(settings, goal).verifier.subtask.referents) == \
        ["lists/titles.txt"]
    writes_bare = ("FILE: titles.txt\nPYTHON:\nimport csv\nwith open('titles.txt', 'w') as f:\n"
                   "    for r in csv.DictReader(open('lists/books.csv')):\n"
                   "        f.write(r['title'] + '\\n')")
    prints = "FILE: titles.txt\nCOMMAND: tail -n +2 lists/books.csv | cut -d, -f1"
    av = validator(settings, goal, writes_bare, prints)
    work = run(settings, "tail -n +2 lists/books.csv | cut -d, -f1 > lists/titles.txt")
    j = av.judge(result([work], "lists/titles.txt written"))
    assert j.kind == "matched", j
    assert "does not exist" not in str(j.outcome), j.outcome
    assert any("lists/titles.txt: 2 line(s)" in c for c in j.outcome.checks), j.outcome.checks
    assert not (ws / "titles.txt").exists()
    # a wrong file where the goal put it is still caught by the same checks
    (ws / "lists" / "titles.txt").write_text("Dune\n")
    av = validator(settings, goal, writes_bare)
    j = av.judge(result([run(settings, "cat lists/titles.txt")], "lists/titles.txt written"))
    assert j.kind == "retry" and "Emma" in j.correction.what_was_wrong, j


def test_what_an_earlier_rounds_check_derived_for_a_file_still_contradicts_it(settings):
    """dev failed-login-days at 1d14656: round 1's check derived the days and refuted the full
    timestamps twice; round 2 wrote the same timestamps, its own check crashed, and the task
    ended "done, but not verified", wrong. An earlier round's check of the same file on the
    same inputs counts as for an answer: not done where no check of this round confirms it."""
    from services.roles.programs import python_command
    ws = settings.workspace
    (ws / "auth.log").write_text("2024-05-01T22:40:11 LOGIN_FAILED user=ben\n"
                                 "2024-05-02T07:05:59 LOGIN_OK user=ben\n"
                                 "2024-05-03T13:00:00 LOGIN_FAILED user=dev\n")
    goal = "Write the day (like 2024-05-02) of every failed login in auth.log to failed_days.txt"
    days = {"output_file": "failed_days.txt",
            "command": "awk '$2 == \"LOGIN_FAILED\" {print substr($1, 1, 10)}' auth.log"}
    stamps = python_command("open('failed_days.txt', 'w').write(''.join(l.split()[0] + '\\n' "
                            "for l in open('auth.log') if 'LOGIN_FAILED' in l))")
    first = validator(settings, goal, days, subtask_id="st-round1")
    assert first.judge(result([run(settings, stamps)], "done")).kind == "retry"
    listing = python_command("open('failed_days.txt', 'w').write('auth.log\\n')")
    assert first.judge(result([run(settings, listing)], "done", attempt=2)).kind == "failed"
    crashed = {"output_file": "failed_days.txt", "command": "cat nope.txt"}
    later = validator(settings, goal, crashed, crashed, crashed, subtask_id="st-round2")
    j = later.judge(result([run(settings, stamps)], "done"))
    assert j.kind == "retry", j
    assert "an earlier round of this task ran" in j.correction.what_was_wrong and \
        "2024-05-03\n" in j.correction.what_was_wrong, j.correction
    # the days themselves agree with it: judged as before (no check of this round: unverified)
    right = python_command("open('failed_days.txt', 'w').write('2024-05-01\\n2024-05-03\\n')")
    again = validator(settings, goal, crashed, crashed, crashed, subtask_id="st-round3")
    j = again.judge(result([run(settings, right)], "done"))
    assert j.kind == "matched" and not j.outcome.verified, j


def test_a_check_is_judged_on_the_copy_whatever_path_the_goal_spelt(settings):
    """dev newest-report at f0b4f41: the goal named the folder by its absolute path, the check
    used it, and on its copy of the workspace `ls -t /…/ws/reports | head -n 1` printed "No such
    file or directory" — exit 0, taken for the check's value, so a disagreement. The goal's
    absolute paths into the workspace are relative on the copy, and a check that printed only
    errors crashed: it derived nothing (no contradiction)."""
    import os
    ws = settings.workspace
    (ws / "reports").mkdir()
    for name, when in (("a.txt", 1_700_000_000), ("b.txt", 1_710_000_000)):
        (ws / "reports" / name).write_text(name)
        os.utime(ws / "reports" / name, (when, when))
    goal = f"what's the most recently modified file in {ws}/reports? just its name"
    newest = "FILE: none\nCOMMAND: ls -t " + str(ws) + "/reports | head -n 1"
    by_time = ("FILE: none\nPYTHON:\nimport os\nprint(max(os.listdir('reports'), "
               "key=lambda f: os.path.getmtime('reports/' + f)))")
    av = validator(settings, goal, newest, by_time)
    j = av.judge(result([run(settings, "ls -t reports | head -n 1")], "b.txt"))
    assert j.kind == "matched", j
    assert any(c.endswith("printed: b.txt") for c in j.outcome.checks), j.outcome.checks
    assert "cannot access" not in str(j.outcome)
    errors_only = "FILE: none\nCOMMAND: ls -t nodir 2>&1 | head -n 1"
    av = validator(settings, goal, errors_only, errors_only)
    j = av.judge(result([run(settings, "ls -t reports | head -n 1")], "b.txt"))
    assert j.kind == "matched" and not j.outcome.verified, j
