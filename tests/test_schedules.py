"""Scheduled goals, the pure parts: `--every`, the cron matcher, due-time math and the missed-run
rule (services/runtime/schedules.py), the schedule file, and the `artoo schedule` commands on it
(no daemon: `add` just stores)."""
from __future__ import annotations

import json
import threading
from datetime import datetime

import pytest
from click.testing import CliRunner

from services.runtime import schedules
from services.runtime.schedules import Cron, ScheduleError, evaluate, parse_every


def ts(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").timestamp()


def at(stamp: float) -> str:
    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M %a")


# -- --every ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [("30s", 30), ("15m", 900), ("1h", 3600), ("2d", 172800),
                                           ("1h30m", 5400), ("1.5h", 5400), (" 2s ", 2),
                                           ("1D", 86400)])
def test_every_parses_units(text, seconds):
    assert parse_every(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "h", "1x", "1h 30", "-1h", "0s", "0.5s", "1h-", "m5"])
def test_every_refuses_bad_durations(text):
    with pytest.raises(ScheduleError):
        parse_every(text)


def test_every_formats_back():
    assert [schedules.format_every(s) for s in (2, 90, 3600, 5400, 86400 + 60)] == \
        ["2s", "1m30s", "1h", "1h30m", "1d1m"]


# -- cron ---------------------------------------------------------------------------------------

def test_cron_fields_numbers_lists_ranges_steps():
    c = Cron.parse("*/15 9-17/4 1,15 * *")
    assert c.minutes == {0, 15, 30, 45} and c.hours == {9, 13, 17} and c.days == {1, 15}
    assert c.months == set(range(1, 13))
    assert Cron.parse("5/20 0 * * *").minutes == {5, 25, 45}
    assert Cron.parse("0-10/5,59 * * * *").minutes == {0, 5, 10, 59}


def test_cron_sunday_is_0_and_7():
    assert Cron.parse("0 0 * * 0").weekdays == Cron.parse("0 0 * * 7").weekdays == {0}
    assert Cron.parse("0 0 * * 5-7").weekdays == {5, 6, 0}
    sunday = datetime(2024, 6, 2, 0, 0)          # a Sunday
    assert Cron.parse("0 0 * * 7").matches(sunday) and not Cron.parse("0 0 * * 1").matches(sunday)


@pytest.mark.parametrize("text", ["* * * *", "* * * * * *", "60 * * * *", "* 24 * * *",
                                  "* * 0 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *",
                                  "5-1 * * * *", "a * * * *", "1,,2 * * * *", "1-x * * * *"])
def test_cron_refuses_bad_expressions(text):
    with pytest.raises(ScheduleError):
        Cron.parse(text)


def test_cron_weekdays_at_nine():
    c = Cron.parse("0 9 * * 1-5")
    # Friday 2024-06-07 10:00 -> Monday 09:00
    assert at(c.next_after(ts("2024-06-07 10:00"))) == "2024-06-10 09:00 Mon"
    assert at(c.next_after(ts("2024-06-10 08:59"))) == "2024-06-10 09:00 Mon"
    assert at(c.next_after(ts("2024-06-10 09:00"))) == "2024-06-11 09:00 Tue"   # strictly after


def test_cron_next_after_crosses_months_and_years():
    assert at(Cron.parse("30 2 1 * *").next_after(ts("2024-01-31 12:00"))) == "2024-02-01 02:30 Thu"
    assert at(Cron.parse("0 0 29 2 *").next_after(ts("2024-03-01 00:00"))) == "2028-02-29 00:00 Tue"
    assert at(Cron.parse("*/20 * * * *").next_after(ts("2024-12-31 23:50"))) == \
        "2025-01-01 00:00 Wed"


def test_cron_both_day_fields_restricted_means_either():
    c = Cron.parse("0 12 13 * 5")              # the 13th, or any Friday (cron(8))
    assert c.matches(datetime(2024, 6, 13, 12, 0))      # Thursday the 13th
    assert c.matches(datetime(2024, 6, 14, 12, 0))      # Friday the 14th
    assert not c.matches(datetime(2024, 6, 12, 12, 0))
    only_13 = Cron.parse("0 12 13 * *")
    assert not only_13.matches(datetime(2024, 6, 14, 12, 0))
    friday_13 = Cron.parse("0 12 * * 5")
    assert not friday_13.matches(datetime(2024, 6, 13, 12, 0))


# -- due-time math and the missed-run rule ---------------------------------------------------------

def test_every_schedule_fires_on_its_grid():
    s = schedules.new_schedule("g", every="10m", now=1000.0)
    assert s["next_due"] == 1600.0
    assert evaluate(s, 1599.0, grace_s=3) == schedules.Decision(next_due=1600.0)
    d = evaluate(s, 1601.0, grace_s=3)
    assert d.fire and d.missed == 0 and d.next_due == 2200.0


def test_missed_slots_are_counted_and_run_once():
    s = schedules.new_schedule("g", every="10m", now=0.0)     # slots 600, 1200, ...
    d = evaluate(s, 3650.0, grace_s=3)                          # down from before 600 to 3650
    assert d.fire and d.missed == 6 and d.next_due == 4200.0    # 600..3600: six slots, one run
    d = evaluate(s, 3601.0, grace_s=3)                          # the last slot is on time
    assert d.fire and d.missed == 5


def test_cron_missed_slots():
    s = schedules.new_schedule("g", cron="0 9 * * 1-5", now=ts("2024-06-07 10:00"))  # Friday
    assert at(s["next_due"]) == "2024-06-10 09:00 Mon"
    d = evaluate(s, ts("2024-06-14 12:00"), grace_s=3)          # down Mon..Fri noon
    assert d.fire and d.missed == 5 and at(d.next_due) == "2024-06-17 09:00 Mon"


def test_no_overlap_skips_while_the_previous_run_goes():
    s = schedules.new_schedule("g", every="2s", now=0.0)
    s["running"] = ["run-a"]
    d = evaluate(s, 2.1, grace_s=3)
    assert d.skip and not d.fire and d.next_due == 4.0
    s["overlap"] = True
    assert evaluate(s, 2.1, grace_s=3).fire
    s["paused"] = True
    assert not evaluate(s, 100.0, grace_s=3).fire


def test_new_schedule_needs_exactly_one_timing():
    with pytest.raises(ScheduleError):
        schedules.new_schedule("g")
    with pytest.raises(ScheduleError):
        schedules.new_schedule("g", every="1h", cron="* * * * *")
    with pytest.raises(ScheduleError):
        schedules.new_schedule("  ", every="1h")


# -- the file and the CLI -------------------------------------------------------------------------

def test_store_edits_are_serialised_and_atomic(tmp_path):
    store = schedules.ScheduleStore(tmp_path / "schedules.json")
    assert store.read() == schedules.empty() and store.stamp() is None

    def adder(n):
        for i in range(20):
            with store.edit() as data:
                data["schedules"].append({"id": f"{n}-{i}"})
    threads = [threading.Thread(target=adder, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.read()["schedules"]) == 60            # no edit lost
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".schedules-")]
    (tmp_path / "schedules.json").write_text("{not json")
    with pytest.raises(ScheduleError):
        store.read()


def test_schedule_commands_without_a_daemon(settings):
    from services.cli import main
    run = lambda *args: CliRunner().invoke(main, list(args), catch_exceptions=False)  # noqa: E731
    out = run("schedule", "add", "count", "the", "files", "--every", "1h", "--yes")
    assert out.exit_code == 0, out.output
    assert "not running" in out.output and "stored" in out.output
    assert run("schedule", "add", "x", "--every", "5q").exit_code == 2
    assert run("schedule", "add", "x", "--every", "1h", "--cron", "* * * * *").exit_code == 2
    assert run("schedule", "add", "x", "--cron", "0 9 * * 1-5", "--workspace", "/etc").exit_code == 2
    out = run("schedule", "add", "weekday report", "--cron", "0 9 * * 1-5", "--overlap")
    assert out.exit_code == 0, out.output
    listed = json.loads(run("schedule", "ls", "--json").output)
    assert [s["when"] for s in listed] == ["every 1h", "cron 0 9 * * 1-5"]
    assert listed[0]["yes"] and listed[1]["overlap"] and listed[0]["goal"] == "count the files"
    sid = listed[0]["id"]
    assert run("schedule", "pause", sid[:4] if len({s["id"][:4] for s in listed}) == 2 else sid
               ).exit_code == 0
    assert json.loads(run("schedule", "ls", "--json").output)[0]["state"] == "paused"
    assert "resumed" in run("schedule", "resume", sid).output
    table = run("schedule", "ls").output
    assert sid in table and "every 1h" in table
    assert run("schedule", "rm", sid).exit_code == 0
    assert run("schedule", "rm", sid).exit_code == 1                     # no such schedule
    assert [s["id"] for s in json.loads(run("schedule", "ls", "--json").output)] == [listed[1]["id"]]
