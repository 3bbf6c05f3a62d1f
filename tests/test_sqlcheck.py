"""The SQL form of the independent check (services/roles/sqlcheck.py): the loader's reading of
tabular files, the reply's query, and what a query asks of the data. Pure functions on real
files; the query's run through the sandbox is in test_law0.py."""
from __future__ import annotations

import subprocess

from services.roles import sqlcheck
from services.safety import evidence as ev


def test_the_loader_reads_csv_by_header_with_quotes_types_and_json_records(tmp_path):
    (tmp_path / "c.csv").write_text('name,age,score\n"Doe, Jane",41,2.5\nTom,,3\n')
    (tmp_path / "o.json").write_text('{"orders": [{"id": 1, "items": [1, 2, 3]}, {"id": 2}]}')
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t.tsv").write_text("k\tv\na\t1\n")
    assert sqlcheck.tabular_files("c.csv, o.json and t.tsv; not x.csv", str(tmp_path)) == \
        ["c.csv", "o.json", "d/t.tsv"]
    text = sqlcheck.describe(["c.csv", "o.json"], str(tmp_path))
    assert "c (c.csv, 2 rows): name TEXT, age INTEGER, score REAL" in text
    assert "row: ('Doe, Jane', 41, 2.5)" in text
    assert "o (o.json, 2 rows): id INTEGER, items TEXT" in text

    def rows(files, query):
        out = subprocess.run(sqlcheck.command(files, query), shell=True, cwd=tmp_path,
                             capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr
    assert rows(["c.csv"], "SELECT name, age FROM c WHERE score > 2 ORDER BY name") == \
        (0, '"Doe, Jane",41\nTom,\n', "")
    # a row of several values is a CSV record, so it equals the file a csv writer wrote
    _, out, _ = rows(["c.csv"], "SELECT * FROM c WHERE age = 41")
    assert ev.same_content('"Doe, Jane",41,2.5\n', out, numbers=True)
    assert rows(["c.csv"], "SELECT name FROM c WHERE age = 41")[1] == "Doe, Jane\n"
    assert rows(["o.json"], "SELECT id FROM o WHERE json_array_length(items) > 2")[1] == "1\n"
    code, out, err = rows(["c.csv"], "SELECT rating FROM c")
    assert code == 2 and out == "" and "no such column: rating" in err


def test_the_reply_gives_one_select_or_nothing():
    assert sqlcheck.parse_query("FILE: none\nSQL: SELECT a FROM t; DROP TABLE t") == \
        "SELECT a FROM t"
    assert sqlcheck.parse_query("FILE: x.txt\nSQL:\n```sql\nSELECT a\nFROM t\n```\nDone.") == \
        "SELECT a\nFROM t"
    assert sqlcheck.parse_query("```sql\nWITH q AS (SELECT 1) SELECT * FROM q\n```") == \
        "WITH q AS (SELECT 1) SELECT * FROM q"
    assert sqlcheck.parse_query("FILE: none\nSQL: DELETE FROM t") == ""
    assert sqlcheck.parse_query("FILE: none\nCOMMAND: wc -l t.csv") == ""


def test_a_query_reads_its_columns_and_looked_for_values(tmp_path):
    (tmp_path / "orders.csv").write_text("id,status,total amount\n1,shipped,3\n")
    query = "SELECT COUNT(*) FROM orders WHERE status = 'shipped' AND \"total amount\" > 2"
    program = ev.python_program(sqlcheck.command(["orders.csv"], query))
    assert sqlcheck.query_of(program) == query
    assert sqlcheck.reads(program, str(tmp_path)) == \
        (frozenset({"status", "shipped", "total amount"}), frozenset({"orders.csv"}))
    assert sqlcheck.reads("import csv\nprint(1)", str(tmp_path)) is None


def test_numbers_compare_by_value_only_where_asked():
    assert ev.same_content("north,900.0\nsouth,50.5\n", "north,900\nsouth,50.5", numbers=True)
    assert not ev.same_content("north,900.0\n", "north,900\n")
    assert not ev.same_content("north,900.1\n", "north,900\n", numbers=True)


def test_files_code_resolved_for_the_goal_count_too(tmp_path):
    # "the team file": no name in the goal's words, but the resolution found the file
    (tmp_path / "team.csv").write_text("name,email\nA,a@x\n")
    (tmp_path / "notes.txt").write_text("x\n")
    assert sqlcheck.tabular_files("the emails of the team file", str(tmp_path),
                                  also=["team.csv", "notes.txt", "team.csv", "gone.csv"]) == \
        ["team.csv"]


def test_a_log_is_a_table_of_its_lines_by_what_code_finds_in_them(tmp_path):
    # timestamp, severity word, key=value fields and the other words are columns; a key found in
    # one message only is that message's text, not a column
    (tmp_path / "app.log").write_text(
        "2024-05-01T10:00:01 [ERROR] disk full user=ana\n\n"
        "2024-05-01 10:00:02 INFO retry ERROR user=bo\n"
        "2024-05-01 10:00:03 INFO set limit=3 user=cy\n10:00:04 DEBUG done user=ana\n")
    text = sqlcheck.describe(["app.log"], str(tmp_path))
    assert "app (app.log, 4 rows): n INTEGER, line TEXT, date TEXT, time TEXT, level TEXT, " \
           "user TEXT, w1 TEXT, w2 TEXT, message TEXT" in text, text
    assert "level values: 'DEBUG', 'ERROR', 'INFO'" in text
    out = subprocess.run(sqlcheck.command(["app.log"], "SELECT n, time, user, message FROM app "
                                                       "WHERE level = 'ERROR'"),
                         shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert out.stdout == "1,10:00:01,ana,disk full user=ana\n", out
    out = subprocess.run(sqlcheck.command(["app.log"], "SELECT line FROM app WHERE w2 = 'ERROR'"),
                         shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert out.stdout == "2024-05-01 10:00:02 INFO retry ERROR user=bo\n", out


def test_a_query_matching_text_anywhere_in_the_line_is_the_grep_method():
    like = sqlcheck.command(["app.log"], "SELECT COUNT(*) FROM app WHERE line LIKE '%ERROR%'")
    by_word = sqlcheck.command(["app.log"], "SELECT COUNT(*) FROM app WHERE level = 'ERROR'")
    names = ["app.log"]          # the goal's names are no part of a method
    assert ev.same_method("grep -c ERROR app.log", like, names)
    assert ev.same_method("python3 -c 'print(sum(\"ERROR\" in l for l in open(\"app.log\")))'",
                          sqlcheck.command(["app.log"], "SELECT COUNT(*) FROM app WHERE "
                                                        "instr(message, 'ERROR') > 0"), names)
    assert not ev.same_method("grep -c ERROR app.log", by_word, names)


def test_a_text_column_holding_one_value_in_two_cases_compares_without_case(tmp_path):
    """`office` holds Berlin and berlin: the data says its case means nothing, so `= 'Berlin'`,
    GROUP BY and DISTINCT ignore it (a check matching one spelling contradicted a right count);
    a column whose values differ otherwise keeps exact comparison."""
    (tmp_path / "crew.tsv").write_text("name\toffice\tteam\nLena\tBerlin\tops\nSara\tberlin\tOps2\n"
                                       "Tom\tLisbon\tops\nKai\tBerlin\tops\n")
    text = sqlcheck.describe(["crew.tsv"], str(tmp_path))
    assert "office TEXT COLLATE NOCASE, team TEXT" in text
    assert "office values: 'Berlin', 'Lisbon', 'berlin'" in text

    def rows(query):
        return subprocess.run(sqlcheck.command(["crew.tsv"], query), shell=True, cwd=tmp_path,
                              capture_output=True, text=True).stdout
    assert rows("SELECT COUNT(*) FROM crew WHERE office = 'Berlin'") == "3\n"
    assert rows("SELECT COUNT(DISTINCT office) FROM crew") == "2\n"
    assert rows("SELECT COUNT(*) FROM crew WHERE team = 'OPS'") == "0\n"


def test_the_scalars_of_a_nested_object_are_columns_too(tmp_path):
    """users.json nests each email under `contact`: a query names it `email` (a check that did
    failed with "no such column: email" and left a right CSV unverified); a name under two
    objects, or also at the top, takes its object's name in front; the object stays JSON text."""
    (tmp_path / "users.json").write_text(
        '{"users": [{"name": "Ana", "city": "Oslo", "contact": {"email": "a@x.io", "city": "Rome"},'
        ' "billing": {"city": "Bonn", "vat": 7}}, {"name": "Lee", "contact": {"email": "l@x.io"}}]}')
    text = sqlcheck.describe(["users.json"], str(tmp_path))
    assert "users (users.json, 2 rows): name TEXT, city TEXT, contact TEXT, billing TEXT, " \
        "email TEXT, contact_city TEXT, billing_city TEXT, vat INTEGER" in text, text

    def rows(query):
        return subprocess.run(sqlcheck.command(["users.json"], query), shell=True, cwd=tmp_path,
                              capture_output=True, text=True).stdout
    assert rows("SELECT name, email FROM users ORDER BY name") == "Ana,a@x.io\nLee,l@x.io\n"
    assert rows("SELECT billing_city, contact_city, city FROM users WHERE vat = 7") == \
        "Bonn,Rome,Oslo\n"
    assert rows("SELECT json_extract(contact, '$.email') FROM users WHERE name = 'Lee'") == \
        "l@x.io\n"


def test_a_statement_that_changes_a_file_s_table_derives_the_whole_file(tmp_path):
    """"Add a row to members.csv": the model writes INSERT whatever the prompt asks. Where the
    goal changes that CSV/TSV file, the statement runs on its table and the table afterwards,
    header first and in its order, is the derivation; anywhere else it is no check."""
    (tmp_path / "members.csv").write_text("username,email,role\nanna,a@x.io,admin\n"
                                          "bo,b@x.io,viewer\n")
    (tmp_path / "t.tsv").write_text("k\tv\na\t1.50\n")

    def derive(reply, files, change_file):
        statement, program = sqlcheck.derivation(reply, files, change_file)
        if not program:
            return statement, None
        out = subprocess.run(program, shell=True, cwd=tmp_path, capture_output=True, text=True)
        return statement, (out.returncode, out.stdout, out.stderr)
    insert = "FILE: members.csv\nSQL: INSERT INTO members (username, email, role) VALUES " \
             "('carol', 'c@x.io', 'editor');"
    statement, (code, out, _) = derive(insert, ["members.csv"], "members.csv")
    assert statement.startswith("INSERT INTO members") and sqlcheck.is_change(statement)
    assert (code, out) == (0, "username,email,role\nanna,a@x.io,admin\nbo,b@x.io,viewer\n"
                              "carol,c@x.io,editor\n")
    _, (_, out, _) = derive("SQL: DELETE FROM members WHERE role = 'viewer'",
                            ["members.csv"], "members.csv")
    assert out == "username,email,role\nanna,a@x.io,admin\n"
    _, (_, out, _) = derive("SQL: UPDATE t SET v = 2 WHERE k = 'a'", ["t.tsv"], "t.tsv")
    assert out == "k\tv\na\t2\n"
    # a SELECT is still a query; a change where the goal changes no file, or another file, or
    # a JSON document, is no check; a statement on another table than the file's fails
    assert derive("SQL: SELECT role FROM members", ["members.csv"], "")[0] == \
        "SELECT role FROM members"
    assert derive(insert, ["members.csv"], "") == ("", None)
    assert derive(insert, ["members.csv"], "other.csv") == ("", None)
    (tmp_path / "m.json").write_text('[{"a": 1}]')
    assert derive("SQL: DELETE FROM m", ["m.json"], "m.json") == ("", None)
    _, (code, out, err) = derive("SQL: DELETE FROM t", ["members.csv", "t.tsv"], "members.csv")
    assert code == 2 and out == "" and "changes no table of members.csv" in err
    # Law 0's independence rules read what it asks of the data, as for a query
    program = ev.python_program(sqlcheck.derivation(insert, ["members.csv"], "members.csv")[1])
    assert sqlcheck.reads(program, str(tmp_path))[1] == frozenset({"members.csv"})


def test_a_blank_cell_is_not_equal_to_a_value(tmp_path):
    """A blank cell is loaded as NULL, and SQL's `x != 'Berlin'` drops it; read as text (the
    way Python and awk read the file) a blank is not Berlin. dev berlin-office-count: a query
    printed 3 for the 4 people in Berlin now, one with no previous office, and refuted a right
    answer. `!=` and `<>` run as IS NOT (string literals untouched)."""
    (tmp_path / "crew.tsv").write_text("name\toffice\tprevious\nA\tBerlin\tHamburg\nB\tBerlin\t\n"
                                       "C\tBerlin\tBerlin\nD\tLisbon\tBerlin\n")

    def rows(query):
        out = subprocess.run(sqlcheck.command(["crew.tsv"], query), shell=True, cwd=tmp_path,
                             capture_output=True, text=True)
        return out.stdout
    assert rows("SELECT COUNT(*) FROM crew WHERE office = 'Berlin' AND previous != 'Berlin'") \
        == "2\n"
    assert rows("SELECT name FROM crew WHERE previous <> 'Berlin' ORDER BY name") == "A\nB\n"
    assert rows("SELECT name FROM crew WHERE name != 'a != b' AND previous = 'Berlin'") == \
        "C\nD\n"
    assert sqlcheck._NS["null_safe"]("SELECT 'x != y' FROM t WHERE a!=1") == \
        "SELECT 'x != y' FROM t WHERE a IS NOT 1"
