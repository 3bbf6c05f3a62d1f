"""R1 Perceiver: fast-path, slug and date rules (pure), and the real perceiver process on a real bus
with the scripted LLM, talking to a stand-in CLI ("user") and stand-in planner and GGS consumers."""
from __future__ import annotations

import threading

import pytest

from audit_support import wait_until
from pipeline_harness import pipeline_stack, run_id
from protocol.messages import ClarificationReply, FinalResult, RunOptions, UserRequest
from replies_pipeline import clarify, perception
from scripted_llm import Delay, Http
from services.runtime import tasklog
from services.roles.perceiver import FINAL_CALL, intent_slug, is_conversational, resolved_relative_dates


@pytest.mark.parametrize("text", ["hi", "Hi!", "Hello, world", "hello there", "你好", "thanks a lot!",
                                  "What's your name?", "who are you", "你是谁", "good morning artoo"])
def test_fast_path_takes_greetings_and_identity(text):
    assert is_conversational(text)


@pytest.mark.parametrize("text", ["what time is it", "what's the weather in Beijing", "how big is /tmp",
                                  "hi, what is the weather today", "who are you and what time is it",
                                  "find my music files", "check disk space", "why is the sky blue",
                                  "", "thanks, now delete a.txt"])
def test_anything_that_may_need_a_tool_takes_the_full_pipeline(text):
    assert not is_conversational(text)


def test_intent_slug_is_stable_and_ignores_phrasing_noise():
    assert intent_slug("List the files in my workspace") == intent_slug("list files in the workspace")
    assert intent_slug("count lines of python files") == intent_slug("Python files: count the lines")
    assert intent_slug("count lines of python files") != intent_slug("count lines of go files")
    assert intent_slug("??") == intent_slug("??") and intent_slug("??").startswith("task-")


def test_relative_dates_guard():
    assert resolved_relative_dates("what changed yesterday", "list changes made on 2026-11-21")
    assert not resolved_relative_dates("what changed yesterday", "list changes made yesterday")
    assert not resolved_relative_dates("report for 2025", "write the 2025 report")


# ---------------------------------------------------------------------------------------------
# the perceiver process
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack():
    with pipeline_stack(["perceiver"], {"ARTOO_LLM_RETRIES": "0",
                                        "ARTOO_CLARIFICATION_TIMEOUT_S": "3"}) as s:
        s.planner_rec = s.recorder("planner", ["TaskSpec"], ack=("TaskSpec",))
        s.ggs_rec = s.recorder("ggs", ["TaskSpec"], ack=("TaskSpec",))
        s.user_rec = s.recorder("user", ["ClarificationRequest", "ConversationalReply"],
                                ack=("ClarificationRequest", "ConversationalReply"))
        s.user = s.client("user")
        yield s


def spec_of(stack, rid):
    return stack.planner_rec.wait_type("TaskSpec", rid)[0]


def test_task_spec_carries_run_id_slug_intent_criteria_and_verbatim_dates(stack):
    rid = run_id()
    stack.llm.add("perceiver", perception("List the files changed yesterday in the repo",
                                          ["a list of changed files is printed"],
                                          deadline="yesterday"), task=rid)
    stack.submit(stack.user, rid, "what files did I change yesterday in the repo?")
    spec = spec_of(stack, rid)
    assert spec.task_id == rid
    assert spec.intent_slug == intent_slug("what files did I change yesterday in the repo?")
    assert spec.intent == "List the files changed yesterday in the repo"
    assert spec.success_criteria == ["a list of changed files is printed"]
    assert spec.constraints.deadline == "yesterday"
    assert spec.raw_input == "what files did I change yesterday in the repo?"
    assert spec.deadline_at > spec.created_at
    assert stack.ggs_rec.wait_type("TaskSpec", rid)  # GGS gets it too (deadline watchdog)
    begin = [e for e in tasklog.read(stack.settings.tasks_dir, rid) if e["kind"] == "task_begin"]
    assert begin and begin[0]["intent_slug"] == spec.intent_slug
    calls = [e for e in tasklog.read(stack.settings.tasks_dir, rid) if e["kind"] == "llm_call"]
    assert calls and calls[0]["role"] == "perceiver" and "yesterday" in str(calls[0]["messages"])


def test_rerun_gets_a_new_run_id_and_the_same_slug(stack):
    first, second = run_id(), run_id()
    stack.llm.add("perceiver", perception("Count the lines of notes.txt"), task=first)
    stack.llm.add("perceiver", perception("Report how many lines notes.txt has"), task=second)
    stack.settings.workspace.mkdir(parents=True, exist_ok=True)
    (stack.settings.workspace / "notes.txt").write_text("a\nb\n")     # the file it names
    for rid in (first, second):
        stack.submit(stack.user, rid, "count the lines of notes.txt")
    a, b = spec_of(stack, first), spec_of(stack, second)
    assert a.task_id != b.task_id and a.intent != b.intent
    assert a.intent_slug == b.intent_slug
    assert [(r.text, r.kind, r.status) for r in a.referents] == [("notes.txt", "file", "found")]


def test_a_goal_that_reads_a_missing_file_costs_no_model_call(stack):
    """Referents resolved in code before any model call: the TaskSpec says what is missing and
    what is near; the perceiver does not ask its model (the user's words are the spec)."""
    rid = run_id()
    stack.settings.workspace.mkdir(parents=True, exist_ok=True)
    (stack.settings.workspace / "report_2022.txt").write_text("x\n")
    stack.submit(stack.user, rid, "How many lines are in report_2023.txt?")
    spec = spec_of(stack, rid)
    ref = spec.referents[0]
    assert (ref.kind, ref.status, ref.near) == ("file", "missing", ["report_2022.txt"])
    assert spec.intent == "How many lines are in report_2023.txt?"
    assert not [e for e in tasklog.read(stack.settings.tasks_dir, rid) if e["kind"] == "llm_call"]


def test_resolved_relative_date_falls_back_to_the_users_words(stack):
    rid = run_id()
    stack.llm.add("perceiver", perception("Show the log entries of 2026-11-21"), task=rid)
    stack.submit(stack.user, rid, "show yesterday's log entries")
    assert spec_of(stack, rid).intent == "show yesterday's log entries"


def test_a_kept_task_spec_goes_once_its_deadline_is_past(stack):
    """The TaskSpec kept for re-deliveries is dropped at the task's FinalResult; one whose
    FinalResult went by while the perceiver was down or stopped goes once the deadline has
    passed (GGS ends every task by then): no per-task state outlives its task."""
    rid = run_id()
    stack.llm.add("perceiver", perception("Count the reports"), task=rid)
    stack.user.send(UserRequest(task_id=rid, text="count the reports",
                                options=RunOptions(deadline_s=1.0)))
    spec_of(stack, rid)
    state = stack.settings.home / "state" / "perceiver" / f"{rid}.json"
    assert state.exists()
    wait_until(lambda: not state.exists(), 20, "the kept TaskSpec dropped after the deadline")


def test_an_unanswered_question_is_asked_again_after_a_restart(stack):
    """The question is saved, then sent; killed in between, the operator would wait until the
    question timed out. The restarted perceiver asks it again under its first id (a client that
    has it acks the copy without asking twice), and the answer finds the restored question."""
    rid = run_id()
    stack.llm.add("perceiver", clarify("Which repository?"), task=rid)
    stack.llm.add("perceiver", perception("Summarise the changes of artoo"), task=rid)
    stack.submit(stack.user, rid, "summarise the changes", interactive=True)
    q1 = stack.user_rec.wait_type("ClarificationRequest", rid)[0]
    first_id = stack.user_rec.envs("ClarificationRequest", rid)[0].id
    stack.kill_role("perceiver")
    watch = stack.recorder("user", ["ClarificationRequest"])   # an operator client not holding it
    stack.restart_role("perceiver")
    again = watch.wait_type("ClarificationRequest", rid, timeout=30)[0]
    assert (again.round, again.question) == (q1.round, q1.question)
    assert watch.envs("ClarificationRequest", rid)[0].id == first_id
    assert len(stack.user_rec.of("ClarificationRequest", rid)) == 1     # not asked twice
    stack.user.send(ClarificationReply(task_id=rid, answer="artoo", round=1))
    assert spec_of(stack, rid).intent == "Summarise the changes of artoo"
    assert stack.llm.calls("perceiver", rid) == 2


def test_clarification_at_most_two_rounds_then_proceed(stack):
    rid = run_id()
    stack.llm.add("perceiver", clarify("Which repository?"), task=rid)
    stack.llm.add("perceiver", clarify("Which branch?"), task=rid)
    stack.llm.add("perceiver", clarify("Which commit?"), task=rid)  # ignored: the final call
    stack.submit(stack.user, rid, "summarise the changes", interactive=True)
    q1 = stack.user_rec.wait_type("ClarificationRequest", rid)[0]
    assert (q1.round, q1.question) == (1, "Which repository?")
    stack.user.send(ClarificationReply(task_id=rid, answer="artoo", round=1))
    q2 = stack.user_rec.wait_type("ClarificationRequest", rid, n=2)[1]
    assert (q2.round, q2.question) == (2, "Which branch?")
    stack.user.send(ClarificationReply(task_id=rid, answer="main", round=2))
    spec = spec_of(stack, rid)
    assert "Which repository? A: artoo" in spec.raw_input and "A: main" in spec.raw_input
    assert spec.intent  # never empty, even though the last call asked again
    prompts = stack.llm.filter("perceiver", rid)
    assert len(prompts) == 3 and FINAL_CALL in prompts[2].user and "A: main" in prompts[2].user
    assert len(stack.user_rec.of("ClarificationRequest", rid)) == 2


def test_unanswered_question_times_out_into_best_interpretation(stack):
    rid = run_id()
    stack.llm.add("perceiver", clarify("Which repository?"), task=rid)
    stack.llm.add("perceiver", perception("Summarise the recent changes"), task=rid)
    stack.submit(stack.user, rid, "summarise the changes", interactive=True)
    stack.user_rec.wait_type("ClarificationRequest", rid)
    spec = spec_of(stack, rid)  # nobody answers
    assert spec.intent == "Summarise the recent changes"
    assert FINAL_CALL in stack.llm.filter("perceiver", rid)[1].user


def test_no_operator_means_no_question(stack):
    rid = run_id()
    stack.llm.add("perceiver", clarify("Which repository?"), task=rid)
    stack.submit(stack.user, rid, "summarise the changes", interactive=False)
    spec = spec_of(stack, rid)
    assert spec.intent == "summarise the changes"
    assert not stack.user_rec.of("ClarificationRequest", rid)
    assert FINAL_CALL in stack.llm.filter("perceiver", rid)[0].user


def test_greeting_ends_the_run_with_a_conversational_reply(stack):
    rid = run_id()
    stack.llm.add("perceiver", "Hello! I'm artoo.", task=rid)
    stack.submit(stack.user, rid, "hello")
    reply = stack.user_rec.wait_type("ConversationalReply", rid)[0]
    assert reply.answer == "Hello! I'm artoo."
    ends = [e for e in tasklog.read(stack.settings.tasks_dir, rid) if e["kind"] == "task_end"]
    assert ends and ends[0]["status"] == "conversational"
    assert not stack.planner_rec.of("TaskSpec", rid)


def test_llm_failure_still_yields_an_honest_task_spec(stack):
    rid = run_id()
    stack.llm.add("perceiver", Http(500), task=rid)
    (stack.settings.workspace / "logs").mkdir(parents=True, exist_ok=True)   # what it names
    stack.submit(stack.user, rid, "compress the logs folder")
    spec = spec_of(stack, rid)
    assert spec.intent == "compress the logs folder"
    assert [e for e in tasklog.read(stack.settings.tasks_dir, rid)
            if e["kind"] == "task_begin"][0]["perceiver_error"]


def test_sigkill_mid_request_is_redelivered_to_the_restarted_perceiver(stack):
    rid = run_id()
    stack.llm.add("perceiver", Delay(30, perception("never")), task=rid)
    stack.submit(stack.user, rid, "archive old reports")
    stack.planner_rec.wait_for(lambda: stack.llm.calls("perceiver", rid) >= 1, what="LLM call")
    stack.kill_role("perceiver")
    stack.llm.add("perceiver", perception("Archive the old reports"), task=rid)
    stack.restart_role("perceiver")
    assert spec_of(stack, rid).intent == "Archive the old reports"


def test_a_request_re_delivered_after_a_restart_gets_the_same_task_spec_not_a_new_one(stack):
    """The sender re-sends a request it never heard acknowledged, under the same id (the scheduler
    after a crash of everything). A restarted perceiver no longer remembers it; it must not
    perceive the goal again (a second TaskSpec re-armed GGS with a new deadline): it sends the
    TaskSpec it sent before, under the same message id — once; a later copy is a plain
    duplicate. Once the task has ended (the kept TaskSpec dropped) a copy after another restart
    is not perceived either: the decision log says the task began."""
    rid = run_id()
    stack.llm.add("perceiver", perception("Tidy the reports folder"), task=rid)
    req = UserRequest(task_id=rid, text="tidy up the reports", options=RunOptions())
    msg_id = stack.user.new_id()
    stack.user.send(req, msg_id=msg_id)
    first = stack.planner_rec.wait_type("TaskSpec", rid)[0]
    first_env = stack.planner_rec.envs("TaskSpec", rid)[0]
    stack.kill_role("perceiver")
    stack.restart_role("perceiver")
    watch = stack.recorder("watch", ["TaskSpec"])   # a planner restarted too: no memory of ids
    stack.user.send(req, msg_id=msg_id)
    again = watch.wait_type("TaskSpec", rid)[0]
    assert watch.envs("TaskSpec", rid)[0].id == first_env.id
    assert again.model_dump() == first.model_dump()
    stack.user.send(req, msg_id=msg_id)             # handled now: acked, not sent a third time
    events = lambda: [e["kind"] for e in tasklog.read(stack.settings.tasks_dir, rid)]
    wait_until(lambda: events().count("perceiver_resent") == 1, 10, "the re-send logged")
    assert events().count("task_begin") == 1 and stack.llm.calls("perceiver", rid) == 1
    stack.client("ggs").publish(FinalResult(task_id=rid, directive="accept", summary="done"))
    state = stack.settings.home / "state" / "perceiver" / f"{rid}.json"
    wait_until(lambda: not state.exists(), 10, "the kept TaskSpec dropped at the task's end")
    # restarted again, the TaskSpec gone with the task's end: the decision log says the task
    # began, so a late copy of the request is acknowledged and not perceived a second time
    tasklog.append(stack.settings.tasks_dir, rid, "task_end", status="accepted")
    stack.kill_role("perceiver")
    stack.restart_role("perceiver")
    acked = threading.Event()
    stack.user.send(req, msg_id=msg_id, on_done=lambda ok: ok and acked.set())
    assert acked.wait(20), "the late copy was never acknowledged"
    assert events().count("task_begin") == 1 and stack.llm.calls("perceiver", rid) == 1
    # one TaskSpec since the first restart: the bus may retransmit that envelope (same node,
    # same id) while an ack is late on a loaded box; a copy from the perceiver restarted since
    # would come from another node
    sent = watch.envs("TaskSpec", rid)
    assert {(e.node, e.id) for e in sent} == {(sent[0].node, first_env.id)}, sent


def test_intent_slug_is_plain_words():
    """Readable slugs (issue 16): plain words of the goal, plurals folded, no stems."""
    assert intent_slug("Count the orders whose status is shipped") == "count-order-shipped-status"
    assert intent_slug("list the directories and entries") == "directory-entry-list"


def test_a_missing_thing_the_world_names_is_recalled_not_missing():
    from services.roles.perceiver import recalled
    refs = [{"text": "secret.txt", "kind": "file", "status": "missing"},
            {"text": "config/app.yaml", "kind": "file", "status": "missing"},
            {"text": "notes.txt", "kind": "file", "status": "found"}]
    recalled(refs, "What artoo knows from earlier sessions:\n- secret.txt holds code: XK-4471\n"
                   "Related: file notes.txt (2× mentioned)")
    assert [r["status"] for r in refs] == ["recalled", "missing", "found"]
    recalled(refs, "")
    assert refs[1]["status"] == "missing"
    # a file named after "in" is made when missing; one the world knows is read, not made
    import tempfile
    from services.safety import referents, record
    goal = "Write the number of lines you counted in data/log.txt earlier to count.txt"
    refs = [r.as_dict() for r in referents.resolve(goal, tempfile.mkdtemp())]
    assert [(r["text"], r["role"]) for r in refs] == [("data/log.txt", "create"),
                                                      ("count.txt", "create")]
    recalled(refs, "- answer to 'How many lines does data/log.txt have?': 17", goal)
    assert [(r["role"], r["status"]) for r in refs] == [("read", "recalled"),
                                                        ("create", "missing")]
    missing = record.undelivered(referents.coerce(refs), tempfile.mkdtemp(), goal)
    assert missing == ["the file count.txt the goal asks for does not exist"], missing


class _BrokenLLM:
    """An LLM client with a bug: it raises what no role expects (not an LLMError)."""
    local = False

    def complete_json(self, *args, **kwargs):
        raise RuntimeError("client bug")

    complete_text = complete_json


def test_a_perceiver_that_fails_on_a_request_ends_the_task_instead_of_leaving_it_waiting():
    # the real GGS process on a real bus; the perceiver in this process with a client that
    # raises: the sender gets a FinalResult at once, not silence until the deadline
    from services.roles.perceiver import Perceiver
    with pipeline_stack(["ggs"]) as s:
        user = s.recorder("user", ["FinalResult"], ack=("FinalResult",))
        holder = {}
        s.client("perceiver", setup=lambda c: holder.setdefault(
            "p", Perceiver(c, s.settings, llm=_BrokenLLM())).register())
        rid = run_id()
        s.submit(s.client("user"), rid, "how many files are in the workspace?")
        final = user.wait_type("FinalResult", rid)[0]
        assert final.status == "abandoned" and "perceiver failed" in final.summary, final
        assert "RuntimeError: client bug" in final.summary
        kinds = [e["kind"] for e in tasklog.read(s.settings.tasks_dir, rid)]
        assert "perceiver_failed" in kinds
        holder["p"].close()


def test_a_world_not_heard_yet_is_asked_and_one_silent_past_missing_after_is_not():
    """`artoo up` returns before the perceiver need have heard the world's first heartbeat: a task
    right after it still gets the world's projection. A world silent for `missing_after_s` is
    taken for down and not asked (no task waits out the query's timeout for it)."""
    from protocol.messages import WorldQuery, WorldResult
    asked: list[str] = []

    def project(env, q: WorldQuery) -> WorldResult:
        asked.append(q.task_id)
        return WorldResult(op=q.op, text="Related: file tick.txt (2× mentioned)")

    # A stand-in world that answers but never heartbeats; the perceiver's silence bound is long
    # enough for the first request to come well inside it.
    with pipeline_stack(["perceiver"], {"ARTOO_MISSING_AFTER_S": "6"}) as stack:
        stack.client("world", lambda c: c.on("WorldQuery", project, request=True, threaded=True))
        planner = stack.recorder("planner", ["TaskSpec"], ack=("TaskSpec",))
        stack.recorder("ggs", ["TaskSpec"], ack=("TaskSpec",))
        user = stack.client("user")
        stack.llm.on("perceiver", lambda req: perception("print the tick value"))
        first = run_id()
        stack.submit(user, first, "print the tick value")
        assert "file tick.txt" in planner.wait_type("TaskSpec", first)[0].world
        assert asked == [first]

        def silent_spec():      # requests one after another until one finds the world taken for down
            rid = run_id()
            stack.submit(user, rid, "print the tick value")
            spec = planner.wait_type("TaskSpec", rid)[0]
            return spec if not spec.world else None
        spec = planner.wait_for(silent_spec, 30, "a TaskSpec made with the world taken for down")
        assert spec.task_id not in asked
        note = [e for e in tasklog.read(stack.settings.tasks_dir, spec.task_id)
                if e["kind"] == "world"]
        assert "not running" in note[0]["world_error"]
