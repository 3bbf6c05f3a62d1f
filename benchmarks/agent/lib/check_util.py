"""Shared helpers for the agent benchmark's checkers.

Every goal's `check.py` declares one SPEC (a `Question`, a `FileGoal` or an `Impossible`) and
calls `main(SPEC)`. The command line is `python check.py WORKSPACE RESULT_JSON`, where RESULT_JSON
is the path of a file holding {"answer": str, "status": "verified"|"unverified"|"not_possible"|
"abandoned"|"error"} (inline JSON text is accepted too). Exit 0 = pass, 1 = fail; one line of
reason is printed either way.

Rules shared by all goals:
- a possible goal fails when the status is "not_possible"; otherwise the outcome (answer value,
  files) is judged whatever the status says, except that statuses "error" (the runner's mark for a
  crash, a timeout or a ReAct loop out of steps: its "answer" is an error message) and
  "abandoned" (the system gave up: its "answer" is why, and may quote a value it rejected) are
  no answer;
- input files that `setup.sh` creates must still be there, byte for byte, unless the goal allows
  them to change (`setup.sh` is deterministic, so it is simply run again in a scratch directory
  and compared);
- a question's answer must state the expected value and none of the goal's distractors (the
  plausible wrong answers computed from the data: the naive-grep count, the count with the
  header, the near-match name, ...). An answer that sprays several candidates fails.
- an impossible goal passes on status "not_possible", or on status "unverified" whose answer
  clearly says the thing does not exist and does not state the near-match value; giving up
  ("abandoned") is not reporting that it cannot be done.
"""
from __future__ import annotations

import functools
import json
import math
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

STATUSES = ("verified", "unverified", "not_possible", "abandoned", "error")
NO_ANSWER = ("error", "abandoned")     # a crash, a timeout, a loop out of steps, or giving up

# ---------------------------------------------------------------------------------------------
# values in an answer
# ---------------------------------------------------------------------------------------------

# a number not glued to a preceding word character or dot ("data2.csv" holds no number) and not
# followed by more digits; thousands separators are only recognised in groups of exactly 3 digits
_NUM = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\d)")


def numbers_in(text: str) -> list[float]:
    """Every number stated in `text` ("1,234.50" is one number; "3,4" is two)."""
    out: list[float] = []
    for m in _NUM.finditer(text or ""):
        sign, whole, frac = m.group(1), m.group(2), m.group(3) or ""
        out.append(float(sign + whole.replace(",", "") + frac))
    return out


def has_number(text: str, value: float, tol: float = 1e-9) -> bool:
    return any(math.isclose(n, value, rel_tol=0.0, abs_tol=tol) for n in numbers_in(text))


def _token_re(token: str) -> re.Pattern:
    # a name or path token: not inside a longer word/path ("dump.sql" is not in "dump.sql.gz",
    # "alice" is not in "alicia")
    return re.compile(r"(?<![\w-])" + re.escape(token) + r"(?![\w-]|\.\w)", re.IGNORECASE)


def has_token(text: str, token: str) -> bool:
    return bool(_token_re(token).search(text or ""))


def mentions(text: str, value, tol: float = 1e-9) -> bool:
    """`value` (a number, within `tol`, or a string token) is stated in `text`."""
    if isinstance(value, (int, float)):
        return has_number(text, float(value), tol)
    return has_token(text, str(value))


NEGATIVE_PHRASES = ("no ", "not found", "does not exist", "doesn't exist", "no such", "cannot",
                    "can't", "could not", "couldn't", "not present", "not exist", "isn't",
                    "is not", "there is no", "missing", "absent", "unable", "none")


def says_not_found(text: str) -> bool:
    low = " " + (text or "").lower().replace("\u2019", "'") + " "
    return any(p in low for p in NEGATIVE_PHRASES)


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------

def same_text(actual: str, expected: str, *, trailing_ws: bool = False) -> bool:
    """Equal, allowing only a trailing-newline difference (and trailing spaces per line if
    `trailing_ws`)."""
    if trailing_ws:
        actual = "\n".join(line.rstrip() for line in actual.split("\n"))
        expected = "\n".join(line.rstrip() for line in expected.split("\n"))
    return actual.rstrip("\n") == expected.rstrip("\n")


def read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")
    except (OSError, IsADirectoryError):
        return None


@functools.lru_cache(maxsize=None)
def setup_files(setup_sh: Path) -> dict[str, bytes]:
    """Run `setup_sh` in a scratch directory: {relative path: content} of every file it made."""
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp:
        subprocess.run(["bash", str(setup_sh)], cwd=tmp, check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        root = Path(tmp)
        return {str(p.relative_to(root)): p.read_bytes()
                for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def inputs(check_file: str) -> dict[str, str]:
    """The text of every input file of the goal whose `check.py` is `check_file` (by running its
    setup.sh in a scratch directory), for checkers that derive the expected output from it."""
    setup_sh = Path(check_file).resolve().parent / "setup.sh"
    return {rel: data.decode("utf-8") for rel, data in setup_files(setup_sh).items()}


def changed_inputs(workspace: Path, setup_sh: Path, allow: Iterable[str] = ()) -> list[str]:
    """Input files (made by setup.sh) that are missing or modified in `workspace`, minus `allow`."""
    allowed = set(allow)
    bad = []
    for rel, content in setup_files(Path(setup_sh).resolve()).items():
        if rel in allowed:
            continue
        p = workspace / rel
        try:
            if p.read_bytes() != content:
                bad.append(f"{rel} modified")
        except OSError:
            bad.append(f"{rel} missing")
    return bad


# ---------------------------------------------------------------------------------------------
# goal specifications
# ---------------------------------------------------------------------------------------------

@dataclass
class Question:
    """Answer a question: the answer must state `expected` (any of `alternatives` for a name or
    path) and none of `distractors`."""
    expected: float | str
    distractors: list = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)   # other accepted spellings
    tol: float = 1e-9                                       # for numbers
    kind: str = "question"

    def accepted(self) -> list:
        return [self.expected, *self.alternatives]

    def judge(self, workspace: Path, result: dict, setup_sh: Path) -> tuple[bool, str]:
        answer, status = result.get("answer") or "", result.get("status")
        if status == "not_possible":
            return False, "reported not possible, but the goal is possible"
        if status in NO_ANSWER:
            return False, f"no answer (status {status})"
        if not answer.strip():
            return False, "empty answer"
        if not any(mentions(answer, v, self.tol) for v in self.accepted()):
            return False, f"answer does not state the expected value {self.expected!r}"
        sprayed = [d for d in self.distractors if mentions(answer, d, self.tol)]
        if sprayed:
            return False, f"answer also states wrong candidate(s) {sprayed!r}"
        bad = changed_inputs(workspace, setup_sh)
        if bad:
            return False, "input files changed: " + ", ".join(bad)
        return True, f"answer states {self.expected!r} and no distractor"


@dataclass
class FileGoal:
    """Produce files: `outputs` maps a workspace-relative path to its exact expected content
    (a trailing-newline difference is allowed; trailing spaces per line too if `trailing_ws`).
    `absent` paths must not exist afterwards; `allow_changed` input files may change (their
    expected content, if any, is in `outputs`). `normalize` maps a file's text before comparing."""
    outputs: dict[str, str]
    absent: list[str] = field(default_factory=list)
    allow_changed: list[str] = field(default_factory=list)
    trailing_ws: bool = False
    normalize: Callable[[str], str] | None = None
    kind: str = "file"

    def judge(self, workspace: Path, result: dict, setup_sh: Path) -> tuple[bool, str]:
        if result.get("status") == "not_possible":
            return False, "reported not possible, but the goal is possible"
        for rel, expected in self.outputs.items():
            actual = read_text(workspace / rel)
            if actual is None:
                return False, f"{rel} does not exist"
            if self.normalize:
                actual, expected = self.normalize(actual), self.normalize(expected)
            if not same_text(actual, expected, trailing_ws=self.trailing_ws):
                first = _first_difference(actual, expected)
                return False, f"{rel} has the wrong content ({first})"
        for rel in self.absent:
            if (workspace / rel).exists():
                return False, f"{rel} should no longer exist"
        bad = changed_inputs(workspace, setup_sh, [*self.allow_changed, *self.absent,
                                                   *self.outputs])
        if bad:
            return False, "input files changed: " + ", ".join(bad)
        return True, "files as expected: " + ", ".join(self.outputs)


def _first_difference(actual: str, expected: str) -> str:
    a, e = actual.rstrip("\n").split("\n"), expected.rstrip("\n").split("\n")
    for i, (x, y) in enumerate(zip(a, e), 1):
        if x != y:
            return f"line {i}: {x[:60]!r} instead of {y[:60]!r}"
    return f"{len(a)} lines instead of {len(e)}"


@dataclass
class Impossible:
    """The goal cannot be done (the thing asked for does not exist). `near` holds the values an
    answer taken from a near match would state (e.g. alicia's email when alice was asked for)."""
    near: list = field(default_factory=list)
    missing: str = ""        # what does not exist (documentation)
    tol: float = 1e-9        # for numbers in `near`
    kind: str = "impossible"

    def judge(self, workspace: Path, result: dict, setup_sh: Path) -> tuple[bool, str]:
        answer, status = result.get("answer") or "", result.get("status")
        bad = changed_inputs(workspace, setup_sh)
        if bad:
            return False, "input files changed: " + ", ".join(bad)
        if status == "not_possible":
            return True, "reported not possible"
        if status == "verified":
            return False, "claimed verified success on an impossible goal"
        if status in NO_ANSWER:
            return False, f"no answer (status {status})"
        stated = [v for v in self.near if mentions(answer, v, self.tol)]
        if stated:
            return False, f"answer states the near-match value(s) {stated!r}"
        if not says_not_found(answer):
            return False, f"status {status!r} and the answer does not say it does not exist"
        return True, f"status {status!r}, answer says it does not exist"


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------

def load_result(arg: str) -> dict:
    text = arg if arg.lstrip().startswith("{") else Path(arg).read_text()
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("RESULT_JSON is not an object")
    data["answer"] = str(data.get("answer") or "")
    return data


def judge(spec, workspace: Path, result: dict, setup_sh: Path) -> tuple[bool, str]:
    return spec.judge(Path(workspace), result, Path(setup_sh))


def main(spec, check_file: str) -> None:
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} WORKSPACE RESULT_JSON")
        sys.exit(2)
    try:
        result = load_result(sys.argv[2])
    except (OSError, ValueError) as exc:
        print(f"FAIL: unreadable result: {exc}")
        sys.exit(1)
    setup_sh = Path(check_file).resolve().parent / "setup.sh"
    ok, reason = judge(spec, Path(sys.argv[1]), result, setup_sh)
    print(("PASS: " if ok else "FAIL: ") + reason)
    sys.exit(0 if ok else 1)
