"""The world model on a real LMDB store (world_server/): bi-temporal facts and their invalidation,
point-in-time queries, Law 0 (claims are never facts), entities, the projection, the goal
generator's three triggers and the operator's decisions (Law 1), forget, one owner."""
from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

from protocol.settings import load_settings
from world_server.model import WorldModel
from world_server.store import WorldError, WorldLocked, WorldStore, known_at, valid_at


@pytest.fixture
def world(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = load_settings(home=tmp_path / "home", workspace=ws)
    store = WorldStore(settings.world_path)
    model = WorldModel(store, settings)
    model.ws = ws
    yield model
    store.close()


def ep(task="t1", at=None):
    return {"task": task, "evidence": "test", "at": at or time.time()}


def facts_of(store, subject, predicate):
    return [f for f in store.all("facts") if (f["subject"], f["predicate"]) == (subject, predicate)]


def run_task(m, task, text, calls, final, slug="s", session=""):
    m.on_request(task, text, session=session, workspace=str(m.ws))
    m.on_spec({"task_id": task, "intent_slug": slug, "intent": text, "raw_input": text,
               "options": {"workspace": str(m.ws)}})
    m.on_outcome(task, {"tool_calls": calls})
    return m.on_final({"task_id": task, **final})


def shell(command, output="", error=None):
    return {"tool": "shell", "arguments": {"command": command}, "target": command,
            "output": output, "error": error}


# -- bi-temporal facts ----------------------------------------------------------------------------

def test_a_contradicting_fact_invalidates_the_current_one_never_deletes(world):
    st = world.store
    t0 = 1_000_000.0
    st.transact(lambda txn: st.assert_fact(txn, "file:app.yaml", "port", "8080", "port 8080",
                                           valid_at=t0, episode=ep("a", t0), now=t0))
    st.transact(lambda txn: st.assert_fact(txn, "file:app.yaml", "port", "8080", "port 8080",
                                           valid_at=t0 + 5, episode=ep("b"), now=t0 + 5))
    [one] = facts_of(st, "file:app.yaml", "port")        # the same fact again: one more source
    assert [e["task"] for e in one["episodes"]] == ["a", "b"]
    new = st.transact(lambda txn: st.assert_fact(txn, "file:app.yaml", "port", "9090",
                                                 "port 9090", valid_at=t0 + 100,
                                                 episode=ep("c"), now=t0 + 100))
    old = next(f for f in facts_of(st, "file:app.yaml", "port") if f["object"] == "8080")
    assert (old["invalid_at"], old["expired_at"], old["invalidated_by"]) == \
        (t0 + 100, t0 + 100, new["id"])
    assert new["invalid_at"] is None and new["expired_at"] is None
    # older history learnt late: inserted already invalid, the current fact untouched
    late = st.transact(lambda txn: st.assert_fact(txn, "file:app.yaml", "port", "7070",
                                                  "port 7070", valid_at=t0 - 50,
                                                  episode=ep("d"), now=t0 + 200))
    assert (late["invalid_at"], late["expired_at"]) == (t0, None)   # until 8080 began
    assert st.one("facts", new["id"])["invalid_at"] is None
    assert len(facts_of(st, "file:app.yaml", "port")) == 3


def test_point_in_time_queries_valid_time_and_system_time(world):
    st = world.store
    t0 = time.time() - 1000
    st.transact(lambda txn: st.assert_fact(txn, "person:user", "name", "Ada", "name Ada",
                                           valid_at=t0, episode=ep("a"), now=t0))
    st.transact(lambda txn: st.assert_fact(txn, "person:user", "name", "Grace", "name Grace",
                                           valid_at=t0 + 500, episode=ep("b"), now=t0 + 500))
    name = lambda facts: [f["object"] for f in facts if f["subject"] == "person:user"]  # noqa
    assert name(world.facts()[0]) == ["Grace"]                       # now
    assert name(world.facts(at=t0 + 100)[0]) == ["Ada"]              # then
    assert name(world.facts(at=t0 - 1)[0]) == []                     # before anything
    assert name(world.facts(as_of=t0 + 100, at=t0 + 100)[0]) == ["Ada"]   # as known then
    facts = st.all("facts")
    ada = next(f for f in facts if f["object"] == "Ada")
    assert valid_at(ada, t0 + 499) and not valid_at(ada, t0 + 500)
    assert known_at(ada, t0 + 499) and not known_at(ada, t0 + 501)


# -- Law 0: facts from checked evidence, claims for the rest --------------------------------------

def test_a_file_is_a_fact_only_when_code_finds_it(world):
    (world.ws / "notes.txt").write_text("apple\nbanana\n")
    got = run_task(world, "t1", "write notes.txt and ghost.txt",
                   [shell("printf 'apple\\nbanana\\n' > notes.txt"),
                    shell("echo x > ghost.txt"), shell("echo y > failed.txt", error="exit 1")],
                   {"status": "unverified", "answer": "wrote both", "summary": "done"})
    assert got == {"facts": 1, "claims": 2, "proposed": []}
    facts, claims = world.facts(claims=True)
    assert [f["subject"] for f in facts] == ["file:notes.txt"]
    assert facts[0]["object"].startswith("sha256:") and "13 bytes" in facts[0]["text"]
    assert {(c["subject"], c["status"]) for c in claims} == {
        ("file:ghost.txt", "not found"), ("task:t1", "unverified")}
    assert "file:failed.txt" not in {e["id"] for e in world.entities()}
    # the projection shows facts, and an unverified answer only marked as one: the user refers
    # to what they were told; other claims never
    text = world.project("what did you write?")["text"]
    assert "notes.txt exists" in text and "ghost.txt was reported" not in text
    [told] = [line for line in text.splitlines() if "wrote both" in line]
    assert "(no check confirmed this answer) answer to" in told
    run_task(world, "t2", "which host does deploy.ini name?", [],
             {"status": "abandoned", "answer": "stage2.internal"})
    assert "stage2" not in world.project("write the host you found into host.txt")["text"]


def test_a_verified_answer_and_settings_read_are_facts_and_a_rewrite_invalidates(world):
    (world.ws / "app.yaml").write_text("port: 8080\n")
    run_task(world, "t1", "find the port in app.yaml",
             [{"tool": "read_file", "arguments": {"path": "app.yaml"}, "target": "app.yaml",
               "output": "port: 8080\n", "error": None}],
             {"status": "verified", "verified": True, "answer": "8080", "checks": ["8080 in "
                                                                                    "app.yaml"]})
    facts, _ = world.facts()
    assert {(f["subject"], f["predicate"], f["object"]) for f in facts} == {
        ("file:app.yaml", "port", "8080"), ("task:t1", "answer", "8080")}
    shown = world.show("app.yaml")
    assert sorted((e["src"], e["label"], e["dst"]) for e in shown["edges"]) == \
        [("file:app.yaml", "sets", "port:8080"), ("task:t1", "read", "file:app.yaml")]
    assert "app.yaml sets port = 8080" in world.project("which port did you find?")["text"]
    # the file is rewritten by a later task: the old content fact is invalidated, kept
    (world.ws / "app.yaml").write_text("port: 9090\n")
    run_task(world, "t2", "set the port to 9090", [shell("echo 'port: 9090' > app.yaml")],
             {"status": "verified", "answer": "done"})
    (world.ws / "app.yaml").write_text("port: 9091\n")
    run_task(world, "t3", "set the port to 9091", [shell("echo 'port: 9091' > app.yaml")],
             {"status": "verified", "answer": "done"})
    contents = facts_of(world.store, "file:app.yaml", "content")
    assert len(contents) == 2 and sum(f["invalid_at"] is None for f in contents) == 1


def test_the_projection_keeps_to_the_goal_s_workspace(world, tmp_path):
    (world.ws / "notes.txt").write_text("mine\n")
    run_task(world, "t1", "write notes.txt", [shell("echo mine > notes.txt")],
             {"status": "verified", "answer": "done"})
    world.on_request("t2", "My name is Ada")
    other = tmp_path / "other"
    other.mkdir()
    assert "notes.txt" in world.project("the notes", workspace=str(world.ws))["text"]
    elsewhere = world.project("the notes", workspace=str(other))["text"]
    assert "notes.txt" not in elsewhere and "Ada" not in elsewhere  # unrelated: not shown
    named = world.project("write my name into the notes", workspace=str(other))["text"]
    assert "notes.txt" not in named and "Ada" in named   # what the user said is global


def test_user_statements_and_entities_with_sentiment(world):
    world.on_request("t1", "My name is Ada and I love the atlas project", at=1000.0)
    world.on_request("t2", "the atlas project is broken again, this is ridiculous", at=2000.0)
    facts, _ = world.facts()
    said = [f for f in facts if f["subject"] == "person:user"]
    assert [(f["object"], f["status"]) for f in said] == [("Ada", "user_said")]
    atlas = world.show("project:atlas")["entity"]
    assert atlas["mentions"] == 2 and atlas["first_mentioned"] == 1000.0
    assert atlas["sentiment"] == pytest.approx(0.7 * 0.8 + 0.3 * -0.8)   # EMA of the valences
    assert "Ada" in world.project("what is my name?")["text"]


def test_forget_marks_keeps_and_hides(world):
    world.on_request("t1", "My name is Ada", at=time.time())
    got = world.forget("person:user", "operator", "privacy")
    assert got["facts_forgotten"] == 1
    assert world.store.one("entities", "person:user")["forgotten"]["reason"] == "privacy"
    assert world.facts()[0] == [] and "Ada" not in world.project("my name")["text"]
    assert len(world.store.all("facts")) == 1                        # kept
    assert [a["op"] for a in world.store.all("audit")] == ["forget"]
    with pytest.raises(WorldError, match="no entity"):
        world.forget("nothing-here", "operator", "")


# -- the goal generator and Law 1 -----------------------------------------------------------------

def test_repetition_proposes_a_schedule_once_and_waits_for_the_operator(world):
    for i in range(2):
        run_task(world, f"r{i}", "check disk usage", [], {"status": "verified"}, slug="disk")
    assert world.goals() == []
    world.on_request("r2", "check disk usage")
    [goal] = world.on_spec({"task_id": "r2", "intent_slug": "disk", "intent": "x",
                            "raw_input": "check disk usage"})
    assert (goal["type"], goal["status"]) == ("AUTO", "BLOCKED")
    assert goal["action"]["kind"] == "schedule" and goal["action"]["goal"] == "check disk usage"
    assert [e["task"] for e in goal["evidence"]] == ["r0", "r1", "r2"]
    assert "repetition" in goal["trigger"]
    world.on_request("r3", "check disk usage")          # no second proposal for the same run
    assert world.on_spec({"task_id": "r3", "intent_slug": "disk", "intent": "x",
                          "raw_input": "x"}) == []
    # scheduled runs and accepted goals' runs do not count as the user repeating themselves
    for i in range(5):
        world.on_request(f"s{i}", "check disk usage", session="schedule:s-1")
        assert world.on_spec({"task_id": f"s{i}", "intent_slug": "disk2", "intent": "x",
                              "raw_input": "x"}) == []
    # Law 1: accept once; a decided goal cannot be decided again
    accepted = world.decide(goal["id"][:6], "accept", "user", "")
    assert accepted["status"] == "PENDING"
    assert world.link(goal["id"], {"schedule_id": "s-abc"})["status"] == "ACTIVE"
    with pytest.raises(WorldError, match="not a proposal"):
        world.decide(goal["id"], "reject", "user", "")


def test_a_negative_aroused_message_proposes_a_reactive_goal(world):
    run_task(world, "f1", "deploy the site", [], {"status": "abandoned", "directive": "abandon",
                                                   "summary": "the build failed"})
    assert world.on_request("calm", "please list the files") == []
    [goal] = world.on_request("angry", "The deploy is broken AGAIN!! fix it")
    assert (goal["type"], goal["status"], goal["action"]["kind"]) == ("REACTIVE", "BLOCKED", "run")
    assert "deploy the site" in goal["description"] and "change nothing" in goal["description"]
    assert goal["evidence"][0]["label"] == "anger" and goal["evidence"][1]["task"] == "f1"
    assert goal["priority"] == pytest.approx(0.5 * 0.7 + 0.3 * 0.5 + 0.2 * 0.8)
    rejected = world.decide(goal["id"], "reject", "user", "not now")
    assert rejected["status"] == "REJECTED"
    with pytest.raises(WorldError):
        world.decide(goal["id"], "accept", "user", "")
    with pytest.raises(WorldError):
        world.link(goal["id"], {"run_id": "x"})


def test_a_reactive_goal_names_the_run_that_failed_last_without_reading_every_run(world,
                                                                                monkeypatch):
    """The latest failure by its end time, kept by the index as runs end (a run's end read back
    late from the audit log does not displace a later one); no scan of the episodes."""
    now = time.time()
    for i, (task, status) in enumerate([("f1", "abandoned"), ("ok", "verified"),
                                        ("f2", "not_possible"), ("ok2", "verified")]):
        world.on_request(task, f"job {task}", workspace=str(world.ws))
        world.on_final({"task_id": task, "status": status, "summary": f"{task} ended"},
                       at=now - 100 + i)
    world.on_request("f0", "job f0", workspace=str(world.ws))
    world.on_final({"task_id": "f0", "status": "abandoned", "summary": "f0 ended"}, at=now - 500)
    scanned = []
    real_scan = world.store.scan
    monkeypatch.setattr(world.store, "scan", lambda txn, db: scanned.append(db) or
                        real_scan(txn, db))
    [goal] = world.on_request("angry", "The job is broken AGAIN!! fix it")
    assert "'job f2'" in goal["description"] and goal["evidence"][1]["task"] == "f2"
    assert "episodes" not in scanned


def test_time_pressure_proposes_a_reminder_when_the_deadline_nears(world):
    now = time.time()
    world.on_request("d1", "the quarterly report is due in 2 hours", at=now)
    assert world.check_deadlines(now) == []                    # 2 h > θ_urgency (1 h)
    [goal] = world.check_deadlines(now + 3700)
    assert goal["type"] == "REACTIVE" and "time pressure" in goal["trigger"]
    assert goal["priority"] > 0.5                              # urgency 0.9 inside the hour
    assert world.check_deadlines(now + 3800) == []             # fires once


def test_world_off_proposes_nothing(tmp_path):
    settings = load_settings(home=tmp_path, workspace=tmp_path, world="off")
    store = WorldStore(settings.world_path)
    m = WorldModel(store, settings)
    assert m.on_request("a", "The deploy is broken AGAIN!!") == []
    for i in range(4):
        m.on_request(f"r{i}", "x")
        assert m.on_spec({"task_id": f"r{i}", "intent_slug": "x", "intent": "x",
                          "raw_input": "x"}) == []
    store.close()


def test_the_user_goal_follows_the_task_lifecycle(world):
    world.on_request("u1", "count the files")
    world.on_spec({"task_id": "u1", "intent_slug": "count", "intent": "count the files",
                   "raw_input": "count the files", "priority": 0.62})
    g = world.goal("u-u1")
    assert (g["type"], g["status"], g["priority"]) == ("USER", "ACTIVE", 0.62)
    world.on_final({"task_id": "u1", "status": "not_possible", "answer": ""})
    assert world.goal("u-u1")["status"] == "FAILED"
    assert world.goals() == [] and len(world.goals(include_user=True)) == 1


def test_one_owner_and_reopen(tmp_path):
    path = tmp_path / "world.lmdb"
    store = WorldStore(path)
    with pytest.raises(WorldLocked):
        WorldStore(path)
    store.transact(lambda txn: store.put(txn, "goals", "g", {"id": "g"}))
    store.close()
    again = WorldStore(path, map_size=1 << 16)         # tiny map: grows on MapFullError
    again.transact(lambda txn: [again.put(txn, "episodes", f"e{i}", {"x": "y" * 2000})
                                for i in range(100)])
    assert again.one("goals", "g") == {"id": "g"} and again.resizes >= 1
    assert again.stats()["episodes"] == 100
    again.close()
    assert os.path.exists(path / "owner.lock")


def test_every_source_message_counts_once_when_handled_again(world):
    """What the audit-log replay relies on: a task's messages handled a second time (seen live and
    read back from the log) change nothing."""
    (world.ws / "out.txt").write_text("x\n")
    calls = [{"tool": "write_file", "arguments": {"path": "out.txt"}, "target": "out.txt",
              "output": "", "error": None}]
    spec = {"task_id": "t1", "intent_slug": "", "intent": "write out.txt",
            "raw_input": "write out.txt", "options": {"workspace": str(world.ws)}}
    final = {"task_id": "t1", "status": "verified", "answer": "done"}
    snapshots = []
    for _ in range(2):
        world.on_request("t1", "write out.txt", workspace=str(world.ws), at=1000.0)
        world.on_spec(spec)
        world.on_outcome("t1", {"tool_calls": calls}, key="msg-1")
        world.on_final(final, at=1001.0)
        snapshots.append((world.store.all("entities"), world.store.all("facts"),
                          world.store.one("goals", "u-t1")))
    first, snapshot = snapshots
    assert snapshot[0] == first[0] and snapshot[2]["status"] == "COMPLETED"
    assert [f["id"] for f in snapshot[1]] == [f["id"] for f in first[1]]
    assert world.store.one("entities", "file:out.txt")["mentions"] == 1
    ep_ = world.store.one("episodes", "t1")
    assert ep_["outcome_keys"] == ["msg-1"]


# -- SYSTEM goals ---------------------------------------------------------------------------------

def _scheduled_run(m, task, status, sid="sch1", text="check the backups"):
    m.on_request(task, text, session=f"schedule:{sid}", workspace=str(m.ws))
    m.on_spec({"task_id": task, "intent_slug": "backups", "intent": text, "raw_input": text,
               "options": {"workspace": str(m.ws)}})
    return m.on_final({"task_id": task, "status": status, "summary": f"run {task}"})["proposed"]


def test_a_schedule_failing_theta_fail_times_in_a_row_proposes_to_pause_it(world):
    assert world.s.world_fail_threshold == 3
    assert _scheduled_run(world, "a1", "abandoned") == []
    assert _scheduled_run(world, "a2", "verified") == []        # a success ends the streak
    assert _scheduled_run(world, "a3", "abandoned") == []
    assert _scheduled_run(world, "a4", "not_possible") == []
    assert _scheduled_run(world, "o1", "abandoned", sid="other") == []   # another schedule's
    [goal] = _scheduled_run(world, "a5", "abandoned")
    assert goal["type"] == "SYSTEM" and goal["status"] == "BLOCKED"      # Law 1: a proposal
    assert goal["action"] == {"kind": "pause_schedule", "schedule_id": "sch1"}
    assert [e["task"] for e in goal["evidence"]] == ["a3", "a4", "a5"]
    assert "repeated failure" in goal["trigger"] and "θ_fail 3" in goal["trigger"]
    assert goal["priority"] == 0.55         # α·0.6 (SYSTEM) + β·0.5 + γ·0.5
    assert _scheduled_run(world, "a6", "abandoned") == []        # one proposal per streak
    _scheduled_run(world, "a7", "verified")
    for t in ("a8", "a9"):
        assert _scheduled_run(world, t, "abandoned") == []
    [again] = _scheduled_run(world, "a10", "abandoned")          # a new streak: a new one
    assert again["id"] != goal["id"]
    # accepting does nothing here but mark it (the CLI pauses the schedule, then links it done)
    world.decide(goal["id"], "accept", "op", "")
    assert world.link(goal["id"], {"schedule_id": "sch1", "done": True})["status"] == "COMPLETED"


def test_user_runs_failing_never_propose_a_system_goal(world):
    for i in range(5):
        world.on_request(f"u{i}", "check the backups", workspace=str(world.ws))
        assert world.on_final({"task_id": f"u{i}", "status": "abandoned"})["proposed"] == []


def test_storage_past_its_bound_proposes_a_report_once_until_it_grows(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    s = replace(load_settings(home=tmp_path / "home", workspace=ws),
                world_storage_max_bytes=1_000_000)
    s.ensure_dirs()
    store = WorldStore(s.world_path)
    try:
        m = WorldModel(store, s)
        (s.audit_dir / "big.bin").write_bytes(b"x" * 500_000)
        assert m.check_storage() == []                           # below the bound
        (s.audit_dir / "big.bin").write_bytes(b"x" * 1_200_000)
        [goal] = m.check_storage()
        assert goal["type"] == "SYSTEM" and goal["status"] == "BLOCKED"
        assert goal["action"]["kind"] == "storage" and goal["action"]["total"] > 1_200_000
        assert goal["evidence"][0]["part"] == "audit"
        assert m.check_storage() == []                           # one waits: no second
        m.decide(goal["id"], "reject", "op", "later")
        assert m.check_storage() == []                           # not grown by half since
        (s.audit_dir / "more.bin").write_bytes(b"x" * 800_000)
        [again] = m.check_storage()
        assert again["id"] != goal["id"]
        off = WorldModel(store, replace(s, world="off"))
        (s.audit_dir / "most.bin").write_bytes(b"x" * 4_000_000)
        m.decide(again["id"], "reject", "op", "")
        assert off.check_storage() == []                         # the world off: no proposals
    finally:
        store.close()


def test_a_fact_of_the_goal_s_workspace_ranks_above_a_global_one_as_related(world):
    # two ports: one a task found in this workspace, one the user named later for another
    # project; "the port you found" here is the first
    (world.ws / "config").mkdir()
    (world.ws / "config" / "app.yaml").write_text("port: 8431\n")
    run_task(world, "t1", "What port does config/app.yaml set?",
             [shell("cat config/app.yaml", output="port: 8431\n")],
             {"status": "verified", "answer": "8431"})
    world.on_request("t2", "Remember that the staging port is 8443")
    text = world.project("Write the port you found in the previous session into port.txt",
                         workspace=str(world.ws))["text"]
    assert "8431" in text and "8443" in text
    assert text.index("8431") < text.index("8443"), text


def test_the_goal_s_own_mention_is_not_knowledge_from_before(world):
    world.on_request("t9", "How many lines are in gone_report.txt?", workspace=str(world.ws))
    goal = "How many lines are in gone_report.txt?"
    assert "gone_report.txt" not in world.project(goal, workspace=str(world.ws), task="t9")["text"]
    world.on_request("t10", goal, workspace=str(world.ws))
    assert "gone_report.txt" in world.project(goal, workspace=str(world.ws), task="t10")["text"]
