"""The cross-session pairs: the second goal of each, run after `artoo down` and `artoo up`,
depends on what the first established (a file it created, a value it found, a name the user
gave). Each pair: `setup(ws)` (files, distractors included, so guessing is not enough),
`first`, optional `between(ws)` (the workspace changes between the sessions: a source removed,
so the value cannot simply be found again), `second`, and `check(ws, result) -> (ok, why)` for
the second goal's real outcome (files on disk, or the answer).
"""
from __future__ import annotations

from pathlib import Path


def _w(ws: Path, rel: str, text: str) -> None:
    p = ws / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _file_has(ws: Path, rel: str, *needles: str) -> tuple[bool, str]:
    p = ws / rel
    if not p.is_file():
        return False, f"{rel} does not exist"
    text = p.read_text(errors="replace")
    missing = [n for n in needles if n.lower() not in text.lower()]
    return (not missing, f"{rel}: missing {missing}" if missing else f"{rel} has {list(needles)}")


def _answer_has(result: dict, *needles: str) -> tuple[bool, str]:
    text = f"{result.get('answer', '')} {result.get('output', '')}".lower()
    missing = [n for n in needles if n.lower() not in text]
    return (not missing, f"answer lacks {missing}" if missing else "answer has it")


def _notes(ws: Path) -> None:
    _w(ws, "notes.txt", "call the plumber\n")
    _w(ws, "todo.txt", "renew passport\n")
    _w(ws, "drafts/letter.txt", "Dear Sam,\n")


PAIRS: list[dict] = [
    {"id": "created-file-append", "kind": "file it created",
     "setup": _notes,
     "first": "Create a file named groceries.txt containing the line: milk",
     "second": "Append the line 'bread' to the file you created in our previous session",
     "check": lambda ws, r: _file_has(ws, "groceries.txt", "milk", "bread")},
    {"id": "created-file-lines", "kind": "file it created",
     "setup": lambda ws: (_notes(ws), _w(ws, "poem.md", "one\ntwo\n")),
     "first": "Write three lines, 'red', 'green' and 'blue', into a new file named colours.md",
     "second": "Count the lines of the file you wrote in the previous session and write the "
               "number to lines.txt",
     "check": lambda ws, r: _file_has(ws, "lines.txt", "3")},
    {"id": "created-folder", "kind": "file it created",
     "setup": lambda ws: (ws / "old").mkdir(),
     "first": "Create a folder named archive-2026 with an empty file keep.txt in it",
     "second": "List the files in the folder you created earlier and write the listing to "
               "listing.txt",
     "check": lambda ws, r: _file_has(ws, "listing.txt", "keep.txt")},
    {"id": "found-port", "kind": "value it found",
     "setup": lambda ws: (_w(ws, "config/app.yaml", "name: shop\nport: 8431\n"),
                          _w(ws, "config/db.yaml", "name: pg\nport: 5432\n")),
     "first": "What port does config/app.yaml set?",
     "between": lambda ws: (ws / "config" / "app.yaml").unlink(),
     "second": "Write the port you found in the previous session into a file named port.txt",
     "check": lambda ws, r: _file_has(ws, "port.txt", "8431")},
    {"id": "found-host", "kind": "value it found",
     "setup": lambda ws: (_w(ws, "deploy.ini", "[target]\nhost: build7.internal\nuser: ci\n"),
                          _w(ws, "staging.ini", "[target]\nhost: stage2.internal\n")),
     "first": "Which host does deploy.ini point to?",
     "between": lambda ws: (ws / "deploy.ini").unlink(),
     "second": "Write the host you found earlier into host.txt",
     "check": lambda ws, r: _file_has(ws, "host.txt", "build7.internal")},
    {"id": "found-code", "kind": "value it found",
     "setup": lambda ws: (_w(ws, "secret.txt", "code: XK-4471\n"),
                          _w(ws, "old-secret.txt", "code: AB-1000\n")),
     "first": "Read secret.txt and tell me the code in it",
     "between": lambda ws: (ws / "secret.txt").unlink(),
     "second": "What was the code you read from secret.txt last time? Write it to code.txt",
     "check": lambda ws, r: _file_has(ws, "code.txt", "XK-4471")},
    {"id": "user-name", "kind": "name the user gave",
     "setup": _notes,
     "first": "My name is Ada. Create a file hello.txt that says hello",
     "second": "Write my name into a file named name.txt",
     "check": lambda ws, r: _file_has(ws, "name.txt", "Ada")},
    {"id": "user-project", "kind": "name the user gave",
     "setup": _notes,
     "first": "Call the project atlas. Create a file project.txt with the line: started",
     "second": "Create a folder named after the project I named last time",
     "check": lambda ws, r: ((ws / "atlas").is_dir(), "folder atlas "
                             + ("exists" if (ws / "atlas").is_dir() else "missing"))},
    {"id": "user-value", "kind": "name the user gave",
     "setup": _notes,
     "first": "Remember that the staging port is 8443. List the files in the workspace",
     "second": "Write the staging port I told you about into staging.txt",
     "check": lambda ws, r: _file_has(ws, "staging.txt", "8443")},
    {"id": "user-colour", "kind": "name the user gave",
     "setup": _notes,
     "first": "Remember that my favourite colour is teal. How many files are in the workspace?",
     "second": "Write my favourite colour into colour.txt",
     "check": lambda ws, r: _file_has(ws, "colour.txt", "teal")},
    {"id": "created-file-read", "kind": "file it created",
     "setup": _notes,
     "first": "Write the text 'meeting at 10' into a new file named reminder.txt",
     "second": "What does the file you created in the previous session say?",
     "check": lambda ws, r: _answer_has(r, "meeting at 10")},
    {"id": "found-count", "kind": "value it found",
     "setup": lambda ws: _w(ws, "data/log.txt", "".join(f"line {i}\n" for i in range(17))),
     "first": "How many lines does data/log.txt have?",
     "between": lambda ws: (ws / "data" / "log.txt").unlink(),
     "second": "Write the number of lines you counted in data/log.txt earlier to count.txt",
     "check": lambda ws, r: _file_has(ws, "count.txt", "17")},
]
