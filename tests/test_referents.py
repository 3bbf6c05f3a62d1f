"""Referents resolved in code (services/safety/referents.py): extraction, roles, resolution
against a real workspace, what makes a goal not_possible, and work that read another referent
than the one named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.safety import referents as R


def ws(tmp_path: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def by_text(refs):
    return {r.text: r for r in refs}


def test_extraction_kinds_and_roles():
    refs = by_text(R.extract("Copy every line of server.log whose level is WARNING into a new "
                             "file called warnings.txt, and move the .csv files in inbox/ into "
                             "a folder called archive/. Keep the \"price\" column."))
    assert refs["server.log"].kind == "file" and refs["server.log"].role == "read"
    assert refs["warnings.txt"].role == "create"
    assert refs["inbox"].kind == "folder" and refs["inbox"].role == "read"
    assert refs["archive"].kind == "folder" and refs["archive"].role == "create"
    assert refs[".csv"].kind == "extension"
    assert refs["price"].kind in ("value", "field")
    q = by_text(R.extract("What value is db_port set to in settings.env? How many settings?"))
    assert q["db_port"].kind == "field" and q["settings.env"].role == "read"
    assert "many" not in q                       # a quantifier is no name
    assert not R.extract("What is 2.5 times 4, e.g. roughly?")


@pytest.mark.parametrize("goal, files, kind, near", [
    ("How many lines are in report_2023.txt?",
     {"report_2022.txt": "a\n", "reports/summary.txt": "b\n"}, "file", "report_2022.txt"),
    ("Which file in the archive/ folder is the largest?",
     {"archives/a.txt": "aaa", "other/b.txt": "b"}, "folder", "archives"),
    ("What is the average of the rating column in items.csv?",
     {"items.csv": "name,ratings_count\nx,1\n"}, "field", "ratings_count"),
    ("What is the email address of the user alice in accounts.csv?",
     {"accounts.csv": "username,email\nalicia,a@x.org\nbob,b@x.org\n"}, "value", "alicia"),
    ("How many .yml files are there?", {"a.yaml": "k: 1\n", "b.yaml": "k: 2\n"},
     "extension", ".yaml"),
    ("What does the key db_port say in settings.env?",
     {"settings.env": "DB_HOST=x\nAPP_PORT=80\n"}, "field", "APP_PORT"),
])
def test_each_kind_missing_with_a_near_match_is_decisive(tmp_path, goal, files, kind, near):
    refs = R.resolve(goal, ws(tmp_path, files))
    missing = R.decisive(goal, refs)
    assert [r.kind for r in missing] == [kind], [r.describe() for r in refs]
    assert near in missing[0].near
    assert near in R.absence_report(missing)


@pytest.mark.parametrize("goal, files", [
    ("How many lines are in report_2023.txt?", {"data/report_2023.txt": "a\n"}),  # elsewhere
    ("Count the lines mentioning \"timeout\" in app.log", {"app.log": "ok\n"}),    # a count: 0
    ("Write the squares of 1..12 to squares.txt", {"notes.txt": "x"}),            # created
    ("Save the hottest city's name in hottest.txt", {"weather.csv": "city,t\na,1\n"}),
    ("How many settings does app.conf define?", {"app.conf": "a=1\n# c\nb=2\n"}),
    ("Which customer spent the most, according to payments.csv?",
     {"payments.csv": "customer_name,amount\nann,5\n"}),                          # unlabelled
    ("Move every .csv file in inbox/ into archive/", {"inbox/a.txt": "x"}),        # nothing to do
    ("What is the total of the Amount column in SALES.csv?",
     {"SALES.csv": "id,amount\n1,2\n"}),                                          # case aside
])
def test_no_false_impossibility(tmp_path, goal, files):
    refs = R.resolve(goal, ws(tmp_path, files))
    assert R.decisive(goal, refs) == [], [r.describe() for r in refs]


def test_absolute_paths_resolve_inside_the_workspace_only(tmp_path):
    root = ws(tmp_path, {"data/q1.csv": "a,b\n1,2\n"})
    refs = by_text(R.resolve(f"Sum column b of {root}/data/q1.csv and of /etc/hosts", root))
    assert refs[f"{root}/data/q1.csv"].status == "found"
    assert refs["/etc/hosts"].status == "outside"
    missing = R.decisive("x", R.resolve(f"How many rows has {root}/data/q3.csv?", root))
    assert missing and "data/q1.csv" in missing[0].near


def test_misread_a_sibling_or_a_near_match(tmp_path):
    root = ws(tmp_path, {"report_2022.txt": "a\n", "report_2024.txt": "b\n"})
    refs = R.resolve("How many lines are in report_2024.txt?", root)
    assert R.misread(refs, ["wc -l < report_2024.txt"]) == []
    assert R.misread(refs, ["wc -l report_2022.txt"]) and \
        "report_2022.txt" in R.misread(refs, ["wc -l report_2022.txt"])[0]
    gone = R.resolve("How many lines are in report_2023.txt?", root)
    assert R.misread(gone, ["cat report_2022.txt | wc -l"])


def test_a_path_no_disk_has_but_the_data_holds_is_a_value_the_work_must_read(tmp_path):
    """"which ip hit /login the most": /login is no file here or anywhere, but a string of the
    log — a value the goal singles out. Work that never reads it counted every request; an
    absolute path that exists outside the workspace stays a file outside it."""
    root = ws(tmp_path, {"logs/access.log": '10.0.0.7 "GET /login HTTP/1.1"\n'
                                            '10.0.0.9 "GET /about HTTP/1.1"\n'})
    goal = f"which ip hit /login the most in {root}/logs/access.log? Compare with /etc/hosts"
    refs = R.resolve(goal, root)
    login = by_text(refs)["/login"]
    assert (login.kind, login.status, login.where) == ("value", "found", ["logs/access.log"])
    assert by_text(refs)["/etc/hosts"].status == "outside"
    every = "awk '{print $1}' logs/access.log | sort | uniq -c | sort -nr | head -1"
    assert R.misread(refs, [every], goal=goal) == R.unread(refs, [every], goal)
    assert "'/login'" in R.unread(refs, [every], goal)[0]
    assert R.misread(refs, ["grep ' /login ' logs/access.log | awk '{print $1}'"], goal=goal) == []
    # a comment reads nothing (dev login-ip-top at 971e00d, after the correction)
    assert R.unread(refs, ["python3 -c 'c = {}\n# the IP that hit /login the most\n"
                           "print(max(c))'"], goal)
    # as commands write it: regex-escaped, or in a program quoted for the shell
    assert R.unread(refs, ["awk '$7 ~ /^\\/login$/ {print $1}' logs/access.log"], goal) == []
    quoted = R.resolve("How many rows name \"O'Brien\"?", ws(tmp_path, {"n.csv": "O'Brien\n"}))
    assert R.unread(quoted, ["python3 -c 'print(sum(l.strip() == \"O'\"'\"'Brien\" for l in "
                             "open(\"n.csv\")))'"], "How many rows name \"O'Brien\"?") == []
    assert R.unread(refs, [every], "which ip made the most requests") == []   # another subtask
    assert by_text(R.resolve("How big is /nowhere/at/all?", root))["/nowhere/at/all"].kind == \
        "file"


def test_wire_form_round_trip(tmp_path):
    from protocol.messages import Referent, TaskSpec
    refs = R.resolve("How many lines are in report_2023.txt?", ws(tmp_path, {"report_2022.txt": ""}))
    spec = TaskSpec(task_id="t", intent_slug="s", intent="i", raw_input="r",
                    referents=[Referent.model_validate(r.as_dict()) for r in refs])
    back = R.coerce(TaskSpec.model_validate(json.loads(spec.model_dump_json())).referents)
    assert [r.as_dict() for r in back] == [r.as_dict() for r in refs]
    assert R.coerce([{"text": "x"}, {"bogus": 1}]) == []       # incomplete: dropped, no crash


def test_unmade_lists_the_files_the_goal_makes_that_do_not_exist_yet(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x\n")
    goal = f"Back up notes/todo.txt as backup/todo.txt and write the count to {tmp_path}/n.txt"
    refs = R.resolve(goal, str(tmp_path))
    assert sorted(R.unmade(refs, str(tmp_path), goal)) == sorted(["backup/todo.txt",
                                                                    f"{tmp_path}/n.txt"])
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "todo.txt").write_text("x\n")
    assert R.unmade(refs, str(tmp_path), goal) == [f"{tmp_path}/n.txt"]


def test_a_name_in_an_example_is_neither_read_nor_made(tmp_path):
    """"e.g. sales-2024-03.csv -> 2024-03-sales.csv" illustrates the rename; that no
    sales-2024-03.csv exists makes nothing impossible, and 2024-03-sales.csv is not required."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sales-2024-01.csv").write_text("a,b\n")
    goal = ("the csv reports in reports have the month at the end of the name, can you flip them "
            "so the date comes first? e.g. sales-2024-03.csv -> 2024-03-sales.csv. anything "
            "thats not a dated csv stays like it is, and save a list to renamed.txt")
    refs = {r.text: r for r in R.resolve(goal, str(tmp_path))}
    assert refs["sales-2024-03.csv"].role == "either"
    assert refs["2024-03-sales.csv"].role == "either"
    assert refs["renamed.txt"].role == "create"          # after the example's sentence ends
    assert not R.decisive(goal, refs.values())
    assert R.unmade(refs.values(), str(tmp_path), goal) == ["renamed.txt"]
    ask = "How many rows does data.csv have, such as the ones in a.csv?"
    assert {r.text: r.role for r in R.extract(ask)} == {"data.csv": "read", "a.csv": "either"}


def test_to_in_a_compound_preposition_is_no_destination(tmp_path):
    """"which port is smtp on according to config/mail.conf?" reads mail.conf: missing, with
    mail.conf.example beside it, the goal is not possible — not a file to make."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "mail.conf.example").write_text("[smtp]\nport = 587\n")
    goal = f"hey which port is smtp on according to {tmp_path}/config/mail.conf? need it"
    ref = next(r for r in R.resolve(goal, str(tmp_path)) if r.kind == "file")
    assert (ref.role, ref.status) == ("read", "missing")
    assert ref.near == ["config/mail.conf.example"]
    assert R.decisive(goal, [ref]) == [ref]
    assert {r.text: r.role for r in R.extract("Copy a.txt next to b.txt as c.txt")} == {
        "a.txt": "either", "b.txt": "either", "c.txt": "create"}


def test_a_name_made_next_to_a_file_goes_in_that_files_folder(tmp_path):
    """"save it right next to it as books.md" makes lists/books.md when the goal read
    lists/books.csv (an absolute path in the goal as well); "next to the script", or "in the
    same folder as" something else, leaves the name where it is."""
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "books.csv").write_text("title,author\nDune,Herbert\n")

    def made(goal: str) -> list[str]:
        return [r.text for r in R.resolve(goal, str(tmp_path)) if r.role == "create"]
    assert made(f"turn {tmp_path}/lists/books.csv into a markdown table and save it right "
                f"next to it as books.md") == ["lists/books.md"]
    assert made("convert lists/books.csv to json and save it as books.json in the same "
                "folder") == ["lists/books.json"]
    assert made("Write the count of lists/books.csv to count.txt next to the script") == \
        ["count.txt"]
    assert made("Copy lists/books.csv to copy.csv") == ["copy.csv"]
    refs = R.resolve("save lists/books.csv next to it as b.csv", str(tmp_path))
    assert R.to_make(refs) == ["lists/b.csv"]
