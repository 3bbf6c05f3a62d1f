"""Law 0 evidence checks (pure logic): provenance, agreement, workspace effects."""
from __future__ import annotations

import os

from services.safety import datafiles, evidence as ev, overview


def test_tokens_normalise_numbers_and_paths():
    assert ev.tokens("There are 1,234 rows in ./data/a.csv.") == \
        ["there", "are", "1234", "rows", "in", "data/a.csv"]
    assert ev.tokens("total: $12.50, 42%") == ["total", "$12.50", "42"]
    assert ev.number_matches("3.33", [3.33333]) and not ev.number_matches("3.4", [3.33333])
    assert ev.number_matches("12.5", [12.50]) and ev.number_matches("42", [42.0])


def test_answer_values_are_concrete_values_not_words():
    vals = ev.answer_values("The person with the highest score is Alice, in scores.csv: 95 points")
    assert "alice" in vals and "scores.csv" in vals and "95" in vals
    assert "person" not in vals and "the" not in vals and "highest" not in vals


def test_invented_value_is_unsupported():
    outputs = [("cut -d, -f1 users.csv", "name\nbob\ncarol\n")]
    assert ev.unsupported_values("The oldest user is Dave", outputs, "who is the oldest user?") \
        == ["dave"]
    assert ev.unsupported_values("Bob", outputs, "who is the oldest user?") == []


def test_echoed_value_is_not_evidence():
    # the date/echo shape: a value the command itself spelt out proves nothing
    outputs = [("echo 2026-11-23", "2026-11-23"), ("date +%F", "2026-11-23")]
    assert ev.unsupported_values("2026-11-23", outputs[:1], "sum the amounts") == ["2026-11-23"]
    assert ev.unsupported_values("42", [("echo 42", "42")], "sum the amounts") == ["42"]
    assert ev.unsupported_values("42", [("awk '{s+=$2} END {print s}' a.txt", "42")], "x") == []


def test_program_spells_out_only_what_it_prints_as_a_literal():
    from services.roles.programs import python_command
    counted = python_command("import json\nwith open('orders.json') as f:\n    data = json.load(f)\n"
                             "n = 0\nfor o in data['orders']:\n    if len(o['items']) > 2:\n"
                             "        n += 1\nprint(n)")
    # the threshold 2 is not what the program printed: a count of 2 was computed
    assert ev.unsupported_values("2", [(counted, "2\n")], "How many orders?") == []
    # printed literals, directly, in an f-string, or through a name bound once to a constant
    for program in ("print(42)", "print(f'total: {42}')", "x = 42\nprint('total', x)",
                    "import sys\nsys.stdout.write(str(40) + '42')"):
        assert ev.unsupported_values("42", [(python_command(program), "total: 42")], "x") \
            == ["42"], program
    assert ev.unsupported_values("42", [(python_command("x = 40\nx += 2\nprint(x)"), "42")],
                                 "x") == []
    # a program that does not parse spells out every value in it (the old rule)
    assert ev.unsupported_values("2", [("python3 -c 'print(2'", "2")], "x") == ["2"]
    assert ev.printed_literals("x = 'Ann'\nprint(f'name: {x}', end='')") == ["name: ", "Ann", ""]


def test_goal_words_are_exempt():
    assert ev.unsupported_values("report.txt has 7 lines", [("wc -l < report.txt", "7")],
                                 "How many lines does report.txt have?") == []


def test_agreement_rules():
    assert ev.agree("42", "42\n").agree
    assert ev.agree("There are 42 Python files", "42").agree
    assert not ev.agree("43", "42").agree                             # wrong value
    assert not ev.agree("a.txt", "a.txt\nc.txt").agree                # incomplete list
    assert ev.agree("a.txt and c.txt", "./a.txt\n./c.txt").agree
    assert ev.agree("3.33", "3.33333").agree                          # rounding
    # sprayed: the answer offers a second data value the check did not print
    assert not ev.agree("42 or maybe 43", "42", data=["x 42 43"]).agree
    # a harmless extra word that is not data does not spoil agreement
    assert ev.agree("Alice (95 points)", "Alice", data=["name,score\nAlice,95\nBob,80"]).agree
    assert not ev.agree("Alice or Bob", "Alice", data=["Alice,95\nBob,80"]).agree
    assert not ev.agree("anything", "").agree
    assert ev.is_absence("") and ev.is_absence("(no output)\n") and not ev.is_absence("0")


def test_same_content_ignores_trailing_whitespace_only():
    assert ev.same_content("a\nb\n", "a\nb")
    assert ev.same_content("a  \nb\n\n", "a\nb\n")
    assert not ev.same_content("header\na\nb\n", "a\nb\n")
    assert not ev.same_content("", "a")
    assert ev.same_content("a\r\nb\r\n", "a\nb", exact=True)
    assert not ev.same_content("a  \nb\n", "a\nb\n", exact=True)


def test_snapshot_diff_and_copy(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "in.csv").write_text("a,b\n1,2\n")
    (ws / "keep.txt").write_text("same")
    (ws / "sub").mkdir()
    (ws / "sub" / "gone.txt").write_text("x")
    before = ev.snapshot(str(ws))
    copy = tmp_path / "copy"
    assert ev.copy_tree(str(ws), str(copy))
    (ws / "out.txt").write_text("new")
    (ws / "in.csv").write_text("a,b\n1,3\n")            # same size, other content
    os.unlink(ws / "sub" / "gone.txt")
    changes = ev.diff(before, ev.snapshot(str(ws)))
    assert changes.created == ["out.txt"]
    assert changes.modified == ["in.csv"]
    assert changes.deleted == ["sub/gone.txt"]
    assert (copy / "in.csv").read_text() == "a,b\n1,2\n" and (copy / "sub" / "gone.txt").exists()
    assert not ev.copy_tree(str(ws), str(tmp_path / "c2"), max_bytes=4)


def test_overview_lists_files_and_heads(tmp_path):
    (tmp_path / "data.csv").write_text("name,age\nann,31\nbob,40\ncid,22\n")
    (tmp_path / "bin").write_bytes(b"\x00\x01")
    text = overview.workspace(str(tmp_path))
    assert "data.csv (" in text and "name,age" in text and "cid,22" not in text
    assert "first lines of bin" not in text
    assert overview.workspace(str(tmp_path / "nope")) == "(the workspace is empty)"


def test_overview_shows_a_small_file_the_goal_names_whole_and_first(tmp_path):
    ini = "[http]\ntimeout = 30\n\n[database]\nname = shop\ntimeout = 45\n"
    (tmp_path / "a.csv").write_text("k,v\n" + "x,1\n" * 5)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "settings.ini").write_text(ini)
    plain = overview.workspace(str(tmp_path))
    assert "timeout = 45" not in plain and "x,1" in plain
    named = overview.workspace(str(tmp_path), whole=["conf/settings.ini", "gone.txt"])
    assert "--- conf/settings.ini (whole):\n" + ini.rstrip("\n") in named
    assert named.index("settings.ini (whole)") < named.index("first lines of a.csv")
    (tmp_path / "conf" / "settings.ini").write_text(ini * 40)       # too big to show whole
    assert "(whole)" not in overview.workspace(str(tmp_path), whole=["conf/settings.ini"])


def test_goal_words_alone_do_not_agree_and_absent_terms(tmp_path):
    assert not ev.agree("= port =", "=\nport\n=", goal="which port does the server use?").agree
    (tmp_path / "users.csv").write_text("name,email\nalicia,a@x.org\n")
    absent = ev.absent_terms("What is the email of the user alice in users.csv?", str(tmp_path))
    assert "alice" in absent and "email" not in absent and "users.csv" not in absent
    # a word's plural or singular is the word the goal names, not something missing
    (tmp_path / "shop.csv").write_text("city,rating,categories\nOslo,4,toys\n")
    assert ev.absent_terms("average ratings per cities, in each category", str(tmp_path)) \
        == ["average"]


def test_agreement_on_zero_or_null_is_no_evidence():
    """A pipeline over a wrong path prints 0 or null; two such derivations agreeing prove nothing."""
    assert not ev.agree("0", "0\n").agree
    assert not ev.agree("The average is null", "null").agree
    assert ev.agree("There are 10", "10").agree


def test_overview_shows_json_shape_and_missing_final_newline(tmp_path):
    (tmp_path / "users.json").write_text(
        '{"exported_by": "crm", "people": [{"name": "a", "age": 3}, {"name": "b", "age": 5}]}')
    (tmp_path / "members.csv").write_text("name,role\nann,admin")
    (tmp_path / "ok.txt").write_text("one\n")
    text = overview.workspace(str(tmp_path))
    assert "shape of users.json (JSON): {exported_by: str, people: [2 × {name: str, age: int}]}" \
        in text
    assert "members.csv (19 bytes, no newline at the end)" in text
    assert "ok.txt (4 bytes)" in text


def test_a_program_that_looks_for_a_word_anywhere_in_the_line_is_grep():
    from services.roles.programs import python_command
    naive = python_command("with open('app.log') as f:\n"
                           "    print(sum(1 for line in f if 'ERROR' in line))")
    assert ev.same_method(naive, 'grep -c "ERROR" app.log', ["app.log"])
    assert ev.same_method(python_command("import re\nprint([l for l in open('a') "
                                         "if re.search(r'ERROR', l)])"), "grep ERROR a", ["a"])
    by_field = python_command("print(sum(1 for l in open('app.log') "
                              "if l.split()[2] == 'ERROR'))")
    assert not ev.same_method(by_field, 'grep -c "ERROR" app.log', ["app.log"])
    assert not ev.same_method(by_field, python_command("print(0)"))    # another program
    assert ev.same_method(by_field, by_field)


def test_same_method_ignores_where_a_command_reads_and_writes():
    names = ["server.log", "warnings.txt"]
    assert ev.same_method("grep -w WARNING server.log > warnings.txt",
                          "cat server.log | grep -E 'WARNING'", names)
    assert not ev.same_method("grep -w WARNING server.log",
                              "awk '$2 == \"WARNING\"' server.log", names)
    assert not ev.same_method("cat server.log", "cat server.log", names)   # no method at all
    assert ev.same_method("grep -w WARNING server.log > warnings.txt",        # a no-op stage added
                          "cat server.log | grep WARNING | awk '{print $0}'", names)
    assert not ev.same_method("wc -l < server.log", "grep -c . server.log", names)
    assert ev.same_method("cut -d, -f2- inv.csv > out.csv", "cut -d, -f2- inv.csv", ["inv.csv"])
    assert not ev.same_method("tail -n +2 inv.csv", "cut -d, -f2- inv.csv", ["inv.csv"])
    assert not ev.same_method("find . -name '*.py' | wc -l", "ls *.py | wc -l")  # only wc shared
    assert ev.method("grep x a.txt > out.txt; cat out.txt", ["a.txt", "out.txt"]) == \
        frozenset({("grep", frozenset(), frozenset())})


def test_a_question_that_describes_a_state_asks_for_no_change():
    assert not ev.asks_to_change("What value is db_port set to in settings.env?")
    assert not ev.asks_to_change("Which rows of data.csv are empty?")
    assert ev.asks_to_change("Set db_port to 5432 in settings.env.")
    assert ev.asks_to_change("Which rows are empty? Keep only the others in out.csv")
    assert ev.asks_to_change("Can you write the total to total.txt?")     # a strong verb
    assert ev.asks_to_change("can u switch the root logger in logging.conf from DEBUG to WARNING?")
    assert not ev.asks_to_change("Which features are enabled in app.ini?")


def test_python_reads_names_what_a_program_asks_of_the_data():
    reads, files = datafiles.python_reads(
        "import csv\nfor r in csv.DictReader(open('orders.csv')):\n"
        "    if r['status'] in ('shipped', 'sent') and r.get('note', '').startswith('#'):\n"
        "        print(r['id'])")
    assert reads == {"status", "shipped", "sent", "note", "#", "id"} and files == {"orders.csv"}
    assert datafiles.python_reads("for x in (:") is None


def test_data_pitfalls_finds_what_could_mislead_one_reading(tmp_path):
    (tmp_path / "clean.csv").write_text("id,status,amount\n1,shipped,3\n2,pending,4\n")
    (tmp_path / "messy.csv").write_text("id,status,amount\n1,Shipped ,3\n2,shipped,n/a\n"
                                        "3,,5\n3,,5\n\n")
    (tmp_path / "people.json").write_text('{"people": [{"name": "a", "age": 3}, {"name": "b"}]}')
    assert datafiles.data_pitfalls(str(tmp_path), ["clean.csv"], ["status", "amount", "shipped"]) == []
    found = " | ".join(datafiles.data_pitfalls(str(tmp_path), ["messy.csv"], ["status", "amount"]))
    for part in ("blank rows", "duplicate records", "status is empty in 2", "spelt differently",
                 "amount mixes numbers with other values ('n/a')"):
        assert part in found, found
    assert "blank rows" not in " ".join(
        datafiles.data_pitfalls(str(tmp_path), ["messy.csv"], ["id"], parsed=True))
    assert datafiles.data_pitfalls(str(tmp_path), ["clean.csv"], ["status", "Shipped"]) == \
        ["clean.csv: status holds 'shipped', not 'Shipped' exactly"]
    assert datafiles.data_pitfalls(str(tmp_path), ["people.json"], ["age"]) == \
        ["people.json: age is empty in 1 record(s)"]
    assert datafiles.data_pitfalls(str(tmp_path), ["../etc/passwd", "nope.csv"], ["x"]) == []
    (tmp_path / "pay.csv").write_text("customer,amount\nann,5\nbob,9\nann,6\n")
    assert datafiles.data_pitfalls(str(tmp_path), ["pay.csv"], ["customer", "amount"]) == \
        ["pay.csv: customer repeats (3 records, 2 different values), so amount per record and "
         "amount per customer differ"]
    assert datafiles.data_pitfalls(str(tmp_path), ["pay.csv"], ["customer"]) == []
    assert datafiles.data_pitfalls(str(tmp_path), ["pay.csv"], ["customer", "amount", "ann"]) \
        == []                                              # a filter, not a group


def test_the_overview_says_when_a_csv_field_spells_one_value_differently(tmp_path):
    (tmp_path / "t.csv").write_text("id,status\n1,closed\n2,open\n3,open\n4,Closed \n5,closed\n")
    (tmp_path / "u.csv").write_text("id,status\n1,closed\n2,open\n")
    text = overview.workspace(str(tmp_path))
    assert "(column status holds the same value spelt differently: 'Closed ', 'closed';" in text
    assert text.count("spelt differently") == 1          # u.csv has one spelling per value
    # shown whole because the goal names it, the file keeps its notes
    whole = overview.workspace(str(tmp_path), whole=["t.csv"])
    assert "--- t.csv (whole):\nid,status\n1,closed" in whole and "5,closed" in whole
    assert "(column status holds the same value spelt differently: 'Closed ', 'closed';" in whole


def test_a_count_of_records_that_is_the_line_count_with_the_header_is_suspect(tmp_path):
    (tmp_path / "t.csv").write_text("id,status\n1,open\n2,closed\n3,open\n")
    root = str(tmp_path)
    assert datafiles.header_counted(root, "How many tickets are in t.csv?", "4") == "t.csv"
    assert datafiles.header_counted(root, "How many tickets are in t.csv?", "3 tickets") == ""
    assert datafiles.header_counted(root, "How many lines does t.csv have?", "4") == ""
    # a money amount is a number too (it crashed the code checks, and a wrong answer stayed done)
    assert datafiles.header_counted(root, "Who paid most in t.csv?", "Oskar, $95.50") == ""
    assert datafiles.header_counted(root, "What did t.csv cost?", "$4") == "t.csv"
    assert datafiles.header_counted(root, "How many tickets are in t.csv?", "4 of 5") == ""


def test_a_header_hint_says_how_python_reads_a_file_not_separated_by_commas():
    from services.safety.evidence import columns_hint
    assert columns_hint("city,population") == "\n(fields, comma-separated: $1=city $2=population)"
    assert columns_hint("name\toffice") == ("\n(fields, tab-separated: $1=name $2=office; in "
                                           "python: csv.DictReader(f, delimiter='\\t'))")
    assert "delimiter=';'" in columns_hint("a;b;c")
    assert columns_hint("just one line of prose") == ""
