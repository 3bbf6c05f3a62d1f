"""Seed 002's formulas (services/runtime/world.py) and the code extraction (worldfacts.py): pure,
no process. Each formula against values worked by hand from its definition."""
from __future__ import annotations

import math
from datetime import datetime

import pytest

from services.runtime import world as W
from services.runtime import worldfacts as X

NOW = 1_800_000_000.0


# -- Definition 3: emotion ----------------------------------------------------------------------

@pytest.mark.parametrize("text,label", [
    ("The deploy is broken again, this is ridiculous", "anger"),
    ("I'm worried about the project deadline", "anxiety"),
    ("thanks, that worked perfectly", "joy"),
    ("wow, this is amazing", "excitement"),
    ("unfortunately the backup is lost", "sadness"),
    ("I'm scared we will lose everything", "fear"),
    ("that was unexpected", "surprise"),
    ("list the files in the workspace", "neutral"),
    ("I am not happy with this", "sadness"),          # a negated positive word
])
def test_labels_map_to_the_seed_table(text, label):
    e = W.detect_emotion(text)
    assert e.label == label
    assert (e.valence, e.base_arousal) == W.EMOTIONS[label]


def test_intensity_modifiers_raise_arousal_capped_at_one():
    calm = W.detect_emotion("the deploy is broken")
    loud = W.detect_emotion("the deploy is BROKEN AGAIN!!")
    assert calm.label == loud.label == "anger"
    assert calm.arousal == 0.9 and calm.delta_arousal == 0.0
    # two caps words +0.2, two '!' with "!!" +0.15: 0.9 + 0.35 capped at 1
    assert loud.delta_arousal == pytest.approx(0.35) and loud.arousal == 1.0
    neutral = W.detect_emotion("list the files!!!")
    assert neutral.label == "neutral" and neutral.arousal == pytest.approx(0.3 + 0.2)
    assert W.intensity("please do it *now*")[0] == pytest.approx(0.05)
    long_text = "word " * 100                        # 500 chars: +min(0.1, 300/2000)
    assert W.intensity(long_text)[0] == pytest.approx(0.1)
    assert W.intensity("export the CSV as JSON")[0] == 0.0     # acronyms are not shouting


# -- §1.4: EMA, importance, lifecycle ---------------------------------------------------------

def test_sentiment_ema():
    assert W.ema(None, -0.8) == -0.8                          # first observation as it is
    assert W.ema(0.5, -0.5, 0.3) == pytest.approx(0.7 * 0.5 + 0.3 * -0.5)
    s = None
    for x in (1.0, 1.0, -1.0):
        s = W.ema(s, x)
    assert s == pytest.approx(0.7 * 1.0 + 0.3 * -1.0)


def test_importance_recency_and_frequency():
    # just mentioned, once: 0.4·1 + 0.6·0.1
    assert W.importance(NOW, NOW, 1) == pytest.approx(0.46)
    # an hour later (τ): 0.4·e^-1 + 0.6·0.1
    assert W.importance(NOW + 3600, NOW, 1) == pytest.approx(0.4 * math.exp(-1) + 0.06)
    # mentions count up to N_cap = 10
    assert W.importance(NOW, NOW, 25) == W.importance(NOW, NOW, 10) == pytest.approx(1.0)
    assert W.importance(NOW + 1e7, NOW, 5) == pytest.approx(0.3, abs=1e-6)
    assert W.importance(NOW, NOW, 4, alpha_r=0.5, alpha_f=0.5, cap=8) == pytest.approx(0.75)


def test_lifecycle_active_then_stale_and_stale_weighs_half():
    week = 7 * 86400.0
    assert W.lifecycle(NOW + week, NOW, week) == "active"
    assert W.lifecycle(NOW + week + 1, NOW, week) == "stale"
    ent = {"last_mentioned": NOW, "mentions": 10}
    fresh = W.context_weight(NOW + 10, ent, stale_after_s=week)
    stale = W.context_weight(NOW + week + 1, ent, stale_after_s=week)
    assert stale == pytest.approx(0.5 * W.importance(NOW + week + 1, NOW, 10))
    assert fresh > stale > 0                          # decayed, never gone


# -- Definition 5: priority ---------------------------------------------------------------------

def test_urgency_is_monotone_in_the_deadline():
    assert W.urgency(NOW, None) == 0.5
    values = [W.urgency(NOW, NOW + d) for d in (5 * 86400, 86399, 3599, 1, -10)]
    assert values == [0.5, 0.7, 0.9, 0.9, 1.0]
    assert values == sorted(values)


def test_priority_weights_and_the_emotion_modifier():
    # USER, no deadline, calm: 0.5·0.5 + 0.3·0.5 + 0.2·0.5
    assert W.priority("USER", NOW) == pytest.approx(0.5)
    # REACTIVE under negative valence: ξ = 0.8
    assert W.priority("REACTIVE", NOW, valence=-0.8, arousal=0.9) == \
        pytest.approx(0.5 * 0.7 + 0.3 * 0.5 + 0.2 * 0.8)
    # an angry user's own goal ranks above a calm one, below a reactive one
    angry = W.priority("USER", NOW, valence=-0.8, arousal=1.0)
    assert angry == pytest.approx(0.25 + 0.15 + 0.2 * (0.5 + 0.3 * 1.0 * 0.8))
    assert W.priority("USER", NOW) < angry < W.priority("REACTIVE", NOW, valence=-0.8,
                                                         arousal=1.0)
    # a deadline within the hour
    assert W.priority("USER", NOW, deadline=NOW + 600) == pytest.approx(0.25 + 0.27 + 0.1)
    assert W.priority("USER", NOW, base=1.0, alpha=0.2, beta=0.4, gamma=0.4) == \
        pytest.approx(0.2 + 0.2 + 0.2)


# -- Definition 6: the three triggers -----------------------------------------------------------

def test_repetition_trigger_counts_within_the_window():
    day = 86400.0
    times = [NOW - 8 * day, NOW - 2 * day, NOW - day]
    assert not W.repetition(times, NOW, 7 * day, 3)          # one is outside Δt
    assert W.repetition(times + [NOW], NOW, 7 * day, 3)
    assert W.suggested_every([NOW, NOW + day, NOW + 2 * day + 600]) == "1d"
    assert W.suggested_every([NOW, NOW + 3, NOW + 6]) == "1m"
    assert W.suggested_every([NOW]) == "1d"


def test_negative_state_trigger():
    assert W.negative_state(-0.8, 0.9)
    assert not W.negative_state(-0.5, 0.9)           # strictly below −θ_v
    assert not W.negative_state(-0.6, 0.2)           # sad but calm
    assert not W.negative_state(0.8, 0.9)
    e = W.detect_emotion("the deploy is broken AGAIN!!")
    assert W.negative_state(e.valence, e.arousal)


def test_time_pressure_trigger_and_stated_deadlines():
    assert W.time_pressure(NOW, NOW + 1800, 3600)
    assert not W.time_pressure(NOW, NOW + 7200, 3600)
    assert not W.time_pressure(NOW, None, 3600)
    assert not W.time_pressure(NOW, NOW - 2 * 86400, 3600)   # long gone
    assert W.stated_deadline("the report is due in 2 hours", NOW) == NOW + 7200
    assert W.stated_deadline("needs to be done in 30 minutes", NOW) == NOW + 1800
    at = datetime.fromtimestamp(W.stated_deadline("finish it by 2026-12-01 09:30", NOW))
    assert (at.year, at.month, at.day, at.hour, at.minute) == (2026, 12, 1, 9, 30)
    clock = W.stated_deadline("send it by 17:00", NOW)
    assert 0 < clock - NOW <= 86400 and datetime.fromtimestamp(clock).hour == 17
    assert W.stated_deadline("list the files in 2 folders", NOW) is None


# -- extraction by code -------------------------------------------------------------------------

def test_mentions_name_entities_of_each_kind():
    got = {m.id for m in X.mentions("My name is Ada; ask Bob about config/app.yaml on port 8080 "
                                    "at db.internal, restart the nginx service, project atlas, "
                                    "the reports folder")}
    assert {"person:Ada", "person:Bob", "file:config/app.yaml", "port:8080", "host:db.internal",
            "service:nginx", "project:atlas", "folder:reports/"} <= got


def test_user_statements_are_what_the_user_said():
    said = {(s.subject, s.predicate, s.value) for s in X.user_statements(
        "My name is Ada. Call the project atlas. Remember that the staging port is 8443.")}
    assert said == {("person:user", "name", "Ada"), ("concept:project", "name", "atlas"),
                    ("concept:staging port", "value", "8443")}


def test_tool_observations_from_records():
    obs = X.tool_observations("shell", {"command": "echo hi > out/a.txt && cat conf.ini | tee "
                                                   "copy.txt"}, "", "", None)
    assert obs.writes == ["out/a.txt", "copy.txt"]
    obs = X.tool_observations("read_file", {"path": "config/app.yaml"}, "config/app.yaml",
                              "name: shop\nport: 8080\nrows: 3\n", None)
    assert obs.reads == ["config/app.yaml"]
    assert obs.settings == [("config/app.yaml", "name", "shop"), ("config/app.yaml", "port",
                                                                   "8080")]
    assert X.tool_observations("write_file", {"path": "x.txt"}, "x.txt", "", "refused").writes \
        == []                                         # a failed call shows nothing
    # grep / head / tail of one file show that file's own lines: its settings too
    obs = X.tool_observations("shell", {"command": "grep host deploy.ini"}, "",
                              "host: build7.internal\n", None)
    assert obs.reads == ["deploy.ini"] and obs.settings == [("deploy.ini", "host",
                                                             "build7.internal")]
    assert X.tool_observations("shell", {"command": "grep host a.ini b.ini"}, "",
                               "a.ini:host: x\n", None).settings == []   # whose line? unknown


# -- priority orders pending work ---------------------------------------------------------------

def test_the_spawner_starts_queued_subtasks_by_priority_fifo_among_equals():
    from collections import deque
    from types import SimpleNamespace

    from protocol.messages import SubTask, SubTaskAssign
    from services.roles.spawner import Spawner

    def assign(sid, p):
        st = SubTask(subtask_id=sid, parent_task_id="t-" + sid, intent="x", priority=p)
        return SubTaskAssign(task_id="t-" + sid, subtask_id=sid, offer_id="o", spawner="n",
                             subtask=st)

    calm = W.priority("USER", NOW)
    angry = W.priority("USER", NOW, valence=-0.8, arousal=1.0)
    urgent = W.priority("USER", NOW, deadline=NOW + 600)
    fake = SimpleNamespace(queue=deque([assign("a", calm), assign("b", angry), assign("c", calm),
                                        assign("d", urgent)]))
    order = [Spawner._pop_next(fake).subtask_id for _ in range(4)]
    assert order == ["d", "b", "a", "c"]


def test_a_prompt_keeps_the_projection_whole_and_cuts_only_the_rest():
    # the dispatcher appends the projection to the planner's context; a head-and-tail cut of the
    # two together dropped the best-ranked facts (they sit in the middle)
    from services.runtime import world
    from services.safety.tools import head_tail
    facts = "\n".join(f"- [today 10:0{i}] fact {i}: value-{i}" for i in range(8))
    projection = f"{world.PROJECTION_HEADER}\n{facts}\nRelated: file a.txt"
    context = "planner notes " * 60 + "\n\n" + projection
    text = world.context_text(context, 200, head_tail)
    assert text.endswith(projection) and "value-0" in text and len(text) < 200 + len(projection) + 60
    assert world.split_projection(context)[1] == projection
    assert world.context_text("short", 200, head_tail) == "short"
    assert world.projected_facts(context)[0] == "[today 10:00] fact 0: value-0"
    assert world.projected_facts("no projection here") == []
