"""Law 0 in code: the checks that decide whether a result is backed by evidence.

A model's verdict is an opinion; these functions are what the runtime believes instead:

* **Values** (`answer_values`, `unsupported_values`): every concrete value of an answer (number,
  path, identifier, name) must occur in the output of a successful tool call — minus what the
  call's own command spelt out (`echo 42` proves nothing) — or in the user's goal.
* **Workspace effects** (`snapshot`, `diff`, `copy_tree`): what really changed on disk around a
  subtask, and a copy of the workspace as it was before, on which an independent check re-derives
  the expected result from the original inputs.
* **Agreement** (`agree`, `same_content`, `is_absence`): an independent re-derivation's output
  compared with the answer (every value it printed is in the answer, and the answer offers no
  competing data value) or with a file's real content.

No I/O beyond reading (and copying) the workspace; no LLM, no bus.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from services.safety.pyprograms import printed_literals, python_program

# Words that carry no value of their own in an answer ("there are 42 files in src").
STOPWORDS = frozenset("""
a an the and or but nor of to in on at by for from with without into onto over under about as is
are was were be been being am do does did done has have had having it its it's this that these those
there here their they them he she his her we our you your i me my not no yes none nothing only
just also than then so such each every all any some both either neither one ones which who whom
whose what when where why how total totals count counts number numbers value values result results
answer answers file files line lines found find contains contain containing named called is:
equal equals per item items entry entries word words row rows column columns field fields
""".split())

_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])")
_SPLIT = re.compile(r"[^\w@.\-/:+%$~]+", re.UNICODE)
_EDGE = ".,:;-/+%$~"
_NUMBER = re.compile(r"^[+-]?\$?\d+(?:\.\d+)?%?$")
_CAPITALISED = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-z]+\b")


def _canonical_number(token: str) -> Optional[float]:
    if not _NUMBER.match(token):
        return None
    try:
        return float(token.replace("$", "").rstrip("%"))
    except ValueError:
        return None


def tokens(text: str) -> list[str]:
    """Value tokens of a text, lower-cased: `1,234` → `1234`, `./a/b.txt` → `a/b.txt`,
    trailing punctuation dropped. Dates, versions and paths stay whole."""
    text = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), text or "")
    out = []
    for raw in _SPLIT.split(text):
        tok = raw
        while tok.startswith("./"):
            tok = tok[2:]
        tok = tok.rstrip(_EDGE).lstrip(_EDGE.replace("/", "").replace("$", "").replace("-", ""))
        if tok.startswith("-") and _canonical_number(tok) is None:
            tok = tok.lstrip("-")
        if tok:
            out.append(tok.lower())
    return out


def is_number(token: str) -> bool:
    return _canonical_number(token) is not None


def number_value(token: str) -> Optional[float]:
    """The number a value token states (`$95.50` → 95.5, `12%` → 12.0), None if it is none."""
    return _canonical_number(token)


def _decimals(token: str) -> int:
    core = token.replace("$", "").rstrip("%")
    return len(core.split(".")[1]) if "." in core else 0


def number_matches(token: str, candidates: Iterable[float | str]) -> bool:
    """`token` equals one of the numbers once the more precise of the two is rounded to the
    other's decimals (an answer of 3.33 for an awk that printed 3.33333, and the reverse)."""
    x = _canonical_number(token)
    if x is None:
        return False
    dx = _decimals(token)
    for cand in candidates:
        y = _canonical_number(cand) if isinstance(cand, str) else cand
        if y is None:
            continue
        dy = _decimals(cand) if isinstance(cand, str) else 0
        if abs(x - y) < 1e-9:
            return True
        if dx and dx < dy and abs(round(y, dx) - x) < 10 ** -(dx + 3):
            return True
        if dy and dy < dx and abs(round(x, dy) - y) < 10 ** -(dy + 3):
            return True
        if dx and not isinstance(cand, str) and abs(round(y, dx) - x) < 10 ** -(dx + 3):
            return True
    return False


@dataclass
class Corpus:
    """The tokens of a set of texts, for membership tests that understand numbers and paths."""
    words: set[str] = field(default_factory=set)
    numbers: list[str] = field(default_factory=list)
    basenames: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, texts: Iterable[str]) -> "Corpus":
        corpus = cls()
        for text in texts:
            for tok in tokens(text):
                corpus.add(tok)
        return corpus

    def add(self, tok: str) -> None:
        self.words.add(tok)
        if is_number(tok):
            self.numbers.append(tok)
        if "/" in tok:
            base = tok.rsplit("/", 1)[1]
            if base:
                self.basenames.add(base)
                self.words.add(base)

    def __contains__(self, tok: str) -> bool:
        if tok in self.words:
            return True
        if is_number(tok):
            return number_matches(tok, self.numbers)
        if "/" in tok:
            base = tok.rsplit("/", 1)[1]
            return base in self.words or base in self.basenames
        return False


def _is_value(tok: str, original_case: set[str]) -> bool:
    """A token that states a concrete value: a number, a path or file name, an identifier, or a
    capitalised name — not an ordinary word."""
    if tok in STOPWORDS or len(tok) == 0:
        return False
    if is_number(tok) or any(ch.isdigit() for ch in tok):
        return True
    if any(ch in tok for ch in "./_@:") and len(tok) > 1:
        return True
    return tok in original_case


def answer_values(answer: str) -> list[str]:
    """The concrete values an answer states, in order, each once."""
    capitalised = {m.group(0).lower() for m in _CAPITALISED.finditer(answer or "")}
    out: list[str] = []
    for tok in tokens(answer):
        if _is_value(tok, capitalised) and tok not in out:
            out.append(tok)
    return out


def strip_spelt_out(output: str, command: str) -> str:
    """A tool output without the values its own command spelt out: `echo 42` or a here-doc
    proves nothing about 42. (A value that is also data stays provable through other calls.)
    A Python program spells out only what it prints or writes as a literal (`printed_literals`):
    the `2` of `len(items) > 2` is a threshold, and a count that happens to equal it was
    computed, not copied (seen: a right count of 2 rejected as a value from nowhere)."""
    program = python_program(command)
    literals = printed_literals(program) if program is not None else None
    text = command if literals is None else " ".join(literals)
    names = set() if literals is None else {m.group(0).lower() for m in _CAPITALISED.finditer(text)}
    spelt = {t for t in tokens(text) if _is_value(t, names)}
    if not spelt:
        return output
    kept = [t for t in tokens(output) if t not in spelt]
    return " ".join(kept)


def unsupported_values(answer: str, outputs: Iterable[tuple[str, str]], goal: str) -> list[str]:
    """Values of `answer` found neither in any (command, output) pair's output — less what that
    command spelt out — nor in the user's goal: values from nowhere."""
    corpus = Corpus.of(strip_spelt_out(out, cmd) for cmd, out in outputs)
    goal_corpus = Corpus.of([goal])
    return [v for v in answer_values(answer) if v not in corpus and v not in goal_corpus]


# ---------------------------------------------------------------------------------------------
# agreement with an independent re-derivation
# ---------------------------------------------------------------------------------------------

_ABSENCE_OUTPUT = re.compile(r"^\s*(\(no output\))?\s*$")


def no_match(error: str) -> bool:
    """grep style exit 1 with no output (or `grep -c`'s 0): "nothing matched" — an answer,
    not a failure."""
    return (error or "").strip() in ("exit status 1", "exit status 1: 0")


def is_absence(output: str) -> bool:
    """A derivation that printed nothing: the thing it looked for does not exist."""
    return bool(_ABSENCE_OUTPUT.match(output or ""))


@dataclass
class Agreement:
    agree: bool
    reason: str
    void: bool = False      # the derivation printed no value (nothing, only 0/null, the goal's
                            # own words): no evidence for the answer, nor against it


_MEASURE = re.compile(r"\d+(?:\.\d+)?[a-z%]{1,3}", re.I)      # 4.0k, 12ms, 3mb
_NAMED_FILE = re.compile(r"\.[a-z][a-z0-9]{0,4}$", re.I)       # events_2022.json, a@b.com


def value_kind(token: str) -> str:
    """What a value token is: a number (or a measure: `4.0k`, `12ms`), a path or file name, or
    a word (names, dates, anything else)."""
    if is_number(token) or _MEASURE.fullmatch(token):
        return "number"
    if "/" in token or _NAMED_FILE.search(token):
        return "path"
    return "word"


def agree(answer: str, derived: str, *, goal: str = "", data: Iterable[str] = ()) -> Agreement:
    """Does an independently derived output confirm `answer`?

    Every value the derivation printed must be in the answer (numbers with rounding), and the
    answer must not offer a competing candidate: a value of the same kind (number / word) that the
    derivation did not print, that the goal did not name, but that occurs in the data (`data`: tool
    outputs or input files) — the signature of a sprayed or near-match answer."""
    derived_values = [t for t in tokens(derived) if t not in STOPWORDS]
    if not derived_values:
        return Agreement(False, "the independent check printed nothing", void=True)
    if all(v in DEGENERATE or _canonical_number(v) == 0 for v in derived_values):
        return Agreement(False, "the independent check printed only 0/null — what a command over "
                                "missing data prints — so it proves nothing", void=True)
    goal_corpus = Corpus.of([goal])
    if all(v in goal_corpus for v in derived_values):
        return Agreement(False, "the independent check printed only words of the goal itself",
                         void=True)
    answer_values = [t for t in tokens(answer) if t not in STOPWORDS]
    kinds, stated = {value_kind(v) for v in derived_values}, {value_kind(v) for v in answer_values}
    if stated and not kinds & stated:
        # a size printed for "which file", a name for "how many": another question answered
        return Agreement(False, f"the independent check printed {', '.join(derived_values[:3])}"
                                f" ({'/'.join(sorted(kinds))}) where the answer states a "
                                f"{'/'.join(sorted(stated))}: it answered another question",
                         void=True)
    answer_corpus = Corpus.of([answer])
    missing = [v for v in derived_values if v not in answer_corpus]
    if missing:
        return Agreement(False, f"the independent check printed {', '.join(missing[:5])}, "
                                f"which the answer does not state")
    derived_corpus = Corpus.of([derived])
    data_corpus = Corpus.of(data)
    kinds = {is_number(v) for v in derived_values}
    extra = [v for v in tokens(answer)
             if v not in STOPWORDS and is_number(v) in kinds and v not in derived_corpus
             and v not in goal_corpus and v in data_corpus]
    if extra:
        return Agreement(False, f"the answer also offers {', '.join(extra[:5])}, which the "
                                f"independent check did not print")
    return Agreement(True, "the independent check printed the same value(s)")


def absent_terms(goal: str, root: str, *, max_bytes: int = 8 << 20) -> list[str]:
    """Words of the goal that name something (a key, a name, a file, a column: not a stopword,
    at least 3 characters) and occur nowhere in the workspace — neither as a file name nor as a
    word of a text file. A claim that something does not exist is corroborated only by a check
    that looked for one of these."""
    wanted = [t for t in dict.fromkeys(tokens(goal))
              if t not in STOPWORDS and len(t) >= 3 and not is_number(t)]
    if not wanted:
        return []
    seen = workspace_words(root, max_bytes=max_bytes)
    return [t for t in wanted if not number_forms(t) & seen]


def number_forms(word: str) -> set[str]:
    """A word and its English singular/plural: the goal's "ratings" names the column `rating`,
    its "sale" the word `sales` (an absent word rejects work and backs "does not exist")."""
    forms = {word, word + "s", word + "es"}
    if word.endswith("ies"):
        forms.add(word[:-3] + "y")
    elif word.endswith("y"):
        forms.add(word[:-1] + "ies")
    if word.endswith("es"):
        forms.add(word[:-2])
    if word.endswith("s") and len(word) > 3:
        forms.add(word[:-1])
    return forms


def workspace_words(root: str, *, max_bytes: int = 8 << 20) -> set[str]:
    """Every word of the workspace, lower-cased: file and folder names, and the words and
    identifiers of its text files (the first `max_bytes`)."""
    seen: set[str] = set()
    total = 0
    for path in _walk(root, 5000):
        rel = os.path.relpath(path, root).lower()
        seen.update(tokens(rel))
        seen.update(part for part in rel.split("/"))
        try:
            size = os.path.getsize(path)
            if size > (1 << 20) or total + size > max_bytes:
                continue
            total += size
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        if b"\x00" in raw[:4096]:
            continue
        text = raw.decode("utf-8", "replace")
        seen.update(tokens(text))
        seen.update(w.lower() for w in re.findall(r"[A-Za-z0-9_]+", text))
    return seen


def _content_lines(text: str, *, strip: bool = True) -> list[str]:
    lines = [ln.rstrip() if strip else ln.rstrip("\r")
             for ln in (text or "").replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def same_content(actual: str, expected: str, *, exact: bool = False,
                 numbers: bool = False, names: Iterable[str] = ()) -> bool:
    """A file's real content equals the derived content (final newlines and line endings aside;
    trailing spaces on a line too, unless `exact`). With `numbers`, a comma-separated cell that
    is a number equals the same number however written (`350` and `350.0`): for a derivation
    whose number formatting is code's choice, not a reading of the goal. With `names` (the
    workspace's files), the derived lines may also carry the name of the file they were read
    from (`wc -l colours.md` prints `3 colours.md`, `grep -c x a.log` with two files
    `a.log:2`): a check's way of printing, not part of the content it derived."""
    a, b = _content_lines(actual, strip=not exact), _content_lines(expected, strip=not exact)
    if _same_lines(a, b, numbers):
        return True
    named = _without_names(b, names)
    return named != b and _same_lines(a, named, numbers)


def _same_lines(a: list[str], b: list[str], numbers: bool) -> bool:
    if not numbers or len(a) != len(b):
        return a == b
    return all(_cells(x) == _cells(y) for x, y in zip(a, b))


def _without_names(lines: list[str], names: Iterable[str]) -> list[str]:
    """The lines with a file name of `names` taken off their start (`a.log:`) or end (` a.log`),
    where what is left is not empty."""
    paths = {n for p in names for n in (p, f"./{p}")}
    if not paths:
        return lines
    out = []
    for line in lines:
        head, sep, rest = line.partition(":")
        if sep and head in paths and rest.strip():
            line = rest.strip()
        else:
            parts = line.rsplit(None, 1)
            if len(parts) == 2 and parts[1] in paths:
                line = parts[0]
        out.append(line)
    return out


def _cells(line: str) -> list:
    return [n if (n := _canonical_number(c.strip())) is not None else c
            for c in line.split(",")]


# ---------------------------------------------------------------------------------------------
# workspace snapshots
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    digest: str            # sha256 of the content for files up to the hash limit, else ""


SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".artoo-undo"})


def _walk(root: str, max_files: int):
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            count += 1
            if count > max_files:
                return
            yield os.path.join(dirpath, name)


def folders(root: str, max_folders: int = 5000) -> set[str]:
    """The folders under root (relative paths), which file snapshots do not list when empty."""
    out: set[str] = set()
    if not root or not os.path.isdir(root):
        return out
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        out |= {os.path.relpath(os.path.join(dirpath, d), root) for d in dirnames}
        if len(out) >= max_folders:
            break
    return out


def snapshot(root: str, *, max_files: int = 5000, hash_max_bytes: int = 1 << 20
             ) -> dict[str, FileState]:
    """Relative path → (size, mtime, hash of small files) of the regular files under root."""
    out: dict[str, FileState] = {}
    for path in _walk(root, max_files):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        digest = ""
        if st.st_size <= hash_max_bytes:
            try:
                with open(path, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                digest = ""
        out[os.path.relpath(path, root)] = FileState(st.st_size, st.st_mtime_ns, digest)
    return out


def digest(root: str, *, max_files: int = 5000) -> str:
    """A cheap fingerprint of the workspace (paths, sizes, mtimes; no content read): it changes
    when any file is written, created or removed."""
    h = hashlib.sha256()
    for path in _walk(root, max_files):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


@dataclass
class Changes:
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def touched(self) -> list[str]:
        return self.created + self.modified

    def describe(self) -> str:
        parts = [f"{label}: {', '.join(paths[:10])}" for label, paths in
                 (("created", self.created), ("modified", self.modified),
                  ("deleted", self.deleted)) if paths]
        return "; ".join(parts) or "no file changed"


def diff(before: dict[str, FileState], after: dict[str, FileState]) -> Changes:
    changes = Changes()
    for path, state in after.items():
        old = before.get(path)
        if old is None:
            changes.created.append(path)
        elif (old.digest and state.digest and old.digest != state.digest) or \
                old.size != state.size or (not old.digest and old.mtime_ns != state.mtime_ns):
            changes.modified.append(path)
    changes.deleted = [p for p in before if p not in after]
    return changes


def copy_tree(root: str, dest: str, *, max_bytes: int = 32 << 20, max_files: int = 5000) -> bool:
    """Copy the workspace's regular files to `dest` (the state before a subtask, for the
    independent check); False when it is too large to copy cheaply."""
    total = 0
    files = []
    for path in _walk(root, max_files + 1):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        total += st.st_size
        files.append(path)
        if total > max_bytes or len(files) > max_files:
            return False
    for path in files:
        target = os.path.join(dest, os.path.relpath(path, root))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            shutil.copy2(path, target)
        except OSError:
            continue
    return True


_TIME_WORDS = re.compile(r"\b(today|tonight|yesterday|tomorrow|date|dates|dated|time|times|now|"
                         r"week|weeks|month|months|year|years|day|days|hour|hours|minute|minutes|"
                         r"recent|recently|ago|latest|newest|oldest|modified|since|until|"
                         r"schedule|deadline|timestamp|age)\b", re.I)


def mentions_time(text: str) -> bool:
    """Whether a goal speaks of time: only then does a prompt carry today's date (a model copies
    a date it sees into commands and answers)."""
    return bool(_TIME_WORDS.search(text or ""))


_CHANGE_WORDS = re.compile(r"\b(write|writes|put|save|store|create|make|add(?!\s+up\b)|append|insert|"
                           r"back\s+up|export|duplicate|"
                           r"prepend|remove|delete|drop|update|replace|rewrite|rename|"
                           r"move|copy|edit|convert|merge|truncate|overwrite|modify|deduplicate|"
                           r"uppercase|lowercase|switch|swap|toggle|enable|disable|uncomment)\b",
                           re.I)
# words that ask for a change in an order but describe a state in a question ("What is db_port
# set to?", "Which records are empty?")
_WEAK_CHANGE_WORDS = re.compile(r"\b(change|sort|fix|set|record|clean|fill|split|correct|strip|"
                                r"trim|keep|empty)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def asks_to_change(goal: str) -> bool:
    """Whether a goal asks for a file to be written or changed at all. A question ("How many
    ERROR lines are in app.log?") names only files it reads: telling the executor to rewrite one of
    them would damage an input."""
    goal = goal or ""
    orders = " ".join(s for s in _SENTENCE_END.split(goal) if not s.rstrip().endswith("?"))
    return bool(_CHANGE_WORDS.search(goal) or _WEAK_CHANGE_WORDS.search(orders))


_WH = re.compile(r"\b(what|which|who|whom|whose|when|where|why|how)\b", re.I)
_REQUEST = re.compile(r"^\W*(?:please\b|(?:can|could|would|will)\s+you\b)", re.I)


def asks_only(goal: str) -> bool:
    """A goal that only asks for information: no change asked for, and every sentence a question
    asking what, which, who, how… — not a request put as a question ("Can you sort names.txt?"),
    whose change the work must keep."""
    if asks_to_change(goal):
        return False
    sentences = [s.strip() for s in _SENTENCE_END.split((goal or "").strip()) if s.strip()]
    return bool(sentences) and all(s.endswith("?") and _WH.search(s) and not _REQUEST.match(s)
                                   for s in sentences)


_REDIRECT = re.compile(r"\d*(?:>>?|<)&?\s*(?:\d\b|'[^']*'|\"[^\"]*\"|[^\s;|&]+)")
_STAGES = re.compile(r"\|\||&&|[|;]")


def method(command: str, names: Iterable[str] = ()) -> frozenset:
    """What a command does, without where it reads from or writes to: per stage, the program,
    its literal arguments other than options, file names and one-letter words, and its options.
    `grep -w ERROR app.log > out.txt` and `cat app.log | grep -E 'ERROR'` share the stage
    (grep, {ERROR}); `cut -d, -f2- a.csv` is (cut, {}, {-d,, -f2-})."""
    skip = {n.lower().lstrip("./") for n in names}
    program = python_program(command)
    if program is not None:
        return _python_method(program)
    stages = []
    for stage in _STAGES.split(_REDIRECT.sub(" ", command or "")):
        try:
            words = shlex.split(stage)
        except ValueError:
            words = stage.split()
        if not words:
            continue
        prog = os.path.basename(words[0])
        if prog == "cat":
            continue
        words = _as_line_match(prog, words)
        prog = words[0]
        rest = [w for w in words[1:] if w.lower().lstrip("./") not in skip]
        args = frozenset(w for w in rest if not w.startswith("-") and len(w) > 1)
        opts = frozenset(w for w in rest if w.startswith("-"))
        stages.append((prog, args, opts))
    return frozenset(stages)


# `'ERROR' in line`, `"x" in l.split()`, `re.search('ERROR', line)`: a word looked for anywhere in
# the line (or among its words), whatever field it is in
_PY_LINE_TEST = re.compile(r"""(['"])([^'"\n]+)\1\s+in\s+[A-Za-z_][\w.]*(?:\(\))?"""
                           r"""|re\.(?:search|findall|match)\(\s*r?(['"])([^'"\n]+)\3""")


# the same in an SQL check's query over a log's lines (services/roles/sqlcheck.py): `line LIKE
# '%ERROR%'`, `instr(message, 'ERROR')`, `line GLOB '*ERROR*'`
_SQL_LINE_TEST = re.compile(r"""\b(?:line|message)\s+LIKE\s+'%([^'%]+)%'"""
                            r"""|\binstr\(\s*(?:line|message)\s*,\s*'([^']+)'\s*\)"""
                            r"""|\b(?:line|message)\s+GLOB\s+'\*([^'*]+)\*'""", re.I)


def _python_method(program: str) -> frozenset:
    """A program's method: its tests of a word anywhere in a line count as `grep WORD`, so a
    program that counts lines containing ERROR and `grep -c ERROR` are one derivation; the rest
    is its own stage (only the same program is the same method)."""
    stages = {("grep", frozenset({m.group(2) or m.group(4)}), frozenset())
              for m in _PY_LINE_TEST.finditer(program)}
    stages |= {("grep", frozenset({next(g for g in m.groups() if g)}), frozenset())
               for m in _SQL_LINE_TEST.finditer(program)}
    return frozenset(stages | {("python", frozenset({" ".join(program.split())}), frozenset())})


_AWK_MATCH = re.compile(r"^\s*/(.+)/\s*(\{\s*print(\s+\$0)?\s*;?\s*\})?\s*$")
_SED_MATCH = re.compile(r"^\s*/(.+)/p\s*$")


def _as_line_match(prog: str, words: list[str]) -> list[str]:
    """`awk '/P/'` and `sed -n '/P/p'` select the lines that contain P anywhere, as `grep P`
    does: one operation under three spellings, so they count as one method."""
    rest = [w for w in words[1:] if not w.startswith("-")]
    if prog == "awk" and rest and (m := _AWK_MATCH.match(rest[0])):
        return ["grep", m.group(1)] + rest[1:]
    if prog == "sed" and "-n" in words and rest and (m := _SED_MATCH.match(rest[0])):
        return ["grep", m.group(1)] + rest[1:]
    return [prog] + words[1:]


def same_method(a: str, b: str, names: Iterable[str] = ()) -> bool:
    """Two commands that rest on the same operation: a stage with the same program and the same
    literal arguments (a pattern, a filter), whatever stages surround it, or — when the work is
    all in options (`cut -d, -f2-`) — the same stages throughout. Their agreeing is one
    derivation, not two: a small model repeats its own mistakes (grepping a word anywhere in the
    line when the goal names a field, cutting a column when the goal drops a row)."""
    names = list(names)
    ma, mb = method(a, names), method(b, names)
    keyed = {(p, args) for p, args, _ in ma if args} & {(p, args) for p, args, _ in mb if args}
    return bool(keyed) or (bool(ma) and ma == mb)


DEGENERATE = frozenset({"null", "none", "nan", "undefined", "-nan", "inf"})


def json_shape(value: Any, depth: int = 0) -> str:
    """A JSON value's shape in a line, with jq-style paths in mind: small models guessed `.age`
    for a list nested under a key. `{people: [3 × {name: str, age: int}], version: int}`."""
    if isinstance(value, dict):
        if depth >= 3:
            return "{…}"
        items = list(value.items())
        inner = ", ".join(f"{k}: {json_shape(v, depth + 1)}" for k, v in items[:12])
        return "{" + inner + (", …" if len(items) > 12 else "") + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return f"[{len(value)} × {json_shape(value[0], depth + 1)}]"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return {int: "int", float: "number", str: "str"}.get(type(value), type(value).__name__)


def columns_hint(first_line: str) -> str:
    """For a delimited header line, the field numbers awk and cut use (small models miscount
    them): `(fields, comma-separated: $1=city $2=population $3=country)`; for another
    separator than the comma, how Python's csv module reads it too (the 1.5B model's
    `csv.DictReader(f)` on a tab-separated file raised KeyError on every column)."""
    for sep, name in ((",", "comma"), ("\t", "tab"), (";", "semicolon"), ("|", "pipe")):
        fields = first_line.split(sep)
        if len(fields) >= 2 and all(0 < len(f.strip()) <= 40 for f in fields) and \
                len(fields) <= 20:
            numbered = " ".join(f"${i}={f.strip()}" for i, f in enumerate(fields, 1))
            reader = "" if sep == "," else f"; in python: csv.DictReader(f, delimiter={sep!r})"
            return f"\n(fields, {name}-separated: {numbered}{reader})"
    return ""


_QUOTED_COMMA = re.compile(r'(^|,)"[^"\n]*,[^"\n]*"(,|$)', re.M)
_NAIVE_SPLIT = re.compile(r"""-F\s*['"]?,|-d\s*['"]?,|\bFS\s*=\s*['"],|\bIFS=['"]?,|split\([^)]*['"],['"]""")


def quoted_commas(text: str) -> bool:
    """A comma-separated text with a quoted field that holds a comma: splitting its lines on
    every comma (`awk -F,`, `cut -d,`) shifts the fields of those rows."""
    return bool(_QUOTED_COMMA.search(text or ""))


def naive_split(command: str) -> bool:
    """The command splits lines on every comma (no CSV quoting rules)."""
    return bool(_NAIVE_SPLIT.search(command or ""))
