"""What the world model learns from a message, extracted by code (no model): pure, no I/O.

* `mentions(text)`: the entities a user message names: files and folders, ports, hosts, services,
  projects, people. Each is (entity id, kind, name); the id is `kind:name` (lower-cased name for
  the kinds where case carries no meaning).
* `user_statements(text)`: what the user *said* a name or a value is ("my name is Ada", "call the
  project atlas", "remember that the staging port is 8443"). Kept as facts of what the user said
  (the episode is the evidence), never as facts about the world the user could not know better.
* `tool_observations(record)`: what one successful tool call shows: a file it wrote (to be checked
  in the workspace before it is a fact), a file it read and the settings read from it
  (`port: 8080`), folders it made.
Claims vs facts is decided by the world process (Law 0), not here.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_FILE = re.compile(r"(?<![\w@/.:~-])((?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,5})"
                   r"(?![\w/-])")
_FOLDER = re.compile(r"(?<![\w@/.:~-])((?:[\w.-]+/)+)(?=[\s,;:!?)'\"`]|$)"
                     r"|\b(?:the\s+)?([\w.-]+)\s+(?:folder|directory)\b"
                     r"|\b(?:folder|directory)\s+(?:called\s+|named\s+)?['\"`]?([\w.-]+)", re.I)
_PORT = re.compile(r"\bport\s*(?:is\s*|=\s*|:\s*|number\s*)?(\d{2,5})\b|(?<![\d.])(?:localhost|"
                   r"127\.0\.0\.1|0\.0\.0\.0)?:(\d{2,5})\b", re.I)
_HOST = re.compile(r"\b((?:\d{1,3}\.){3}\d{1,3}|(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|local|"
                   r"internal|lan|cloud|ai))\b", re.I)
_SERVICE = re.compile(r"\b([\w-]+)\.service\b|\b(?:the\s+)?([\w-]+)\s+(?:service|server|daemon)\b",
                      re.I)
_PROJECT = re.compile(r"\bproject\s+(?:called\s+|named\s+)?['\"`]?([A-Za-z][\w-]+)|"
                      r"\b['\"`]?([A-Za-z][\w-]+)['\"`]?\s+project\b", re.I)
_PERSON = re.compile(r"\b(?i:my name is) ([A-Z][\w-]+)|\b(?:ask|tell|email|ping|from|for|by)\s+"
                     r"([A-Z][a-z]+)\b(?!\s*[./])")
_EXT_WORDS = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})
_NOT_NAMES = frozenset({"the", "a", "an", "this", "that", "my", "your", "our", "new", "old",
                        "same", "other", "its", "it", "each", "every", "which", "what", "one",
                        "some", "any", "main", "whole", "current", "web", "local", "workspace",
                        "root", "parent", "home", "data", "file", "me", "us", "you", "them",
                        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                        "sunday", "today", "tomorrow", "yesterday", "example", "test", "mcp"})
MAX_NAME = 120


@dataclass(frozen=True)
class Mention:
    id: str
    kind: str
    name: str


def entity_id(kind: str, name: str) -> str:
    name = " ".join(str(name).split())[:MAX_NAME].strip().strip("'\"`").rstrip(".,;:")
    if kind in ("file", "folder"):
        name = name.removeprefix("./")
        if kind == "folder":
            name = name.rstrip("/") + "/"
    elif kind not in ("person", "project"):
        name = name.lower()
    return f"{kind}:{name}"


def _mention(kind: str, name: str) -> Mention | None:
    name = (name or "").strip()
    if not name or name.lower() in _NOT_NAMES or name.lower() in _EXT_WORDS:
        return None
    eid = entity_id(kind, name)
    return Mention(eid, kind, eid.split(":", 1)[1])


def mentions(text: str) -> list[Mention]:
    """Every entity the text names, once each, in order of first appearance."""
    text = text or ""
    found: list[tuple[int, Mention]] = []

    def add(pos: int, kind: str, name: str) -> None:
        m = _mention(kind, name)
        if m is not None:
            found.append((pos, m))

    for m in _FILE.finditer(text):
        name = m.group(1)
        if name.lower() in _EXT_WORDS or re.fullmatch(r"[\d.]+", name) or _HOST.fullmatch(name) \
                and not re.search(r"\.(txt|md|csv|json|py|log|yaml|yml|toml|ini|sh|html)$", name):
            continue
        add(m.start(), "file", name)
    for m in _FOLDER.finditer(text):
        name = m.group(1) or m.group(2) or m.group(3)
        if name and not re.fullmatch(r"[\d./]+", name) and not name.startswith(("http", "www")):
            add(m.start(), "folder", name)
    for m in _PORT.finditer(text):
        port = m.group(1) or m.group(2)
        if port and 0 < int(port) < 65536:
            add(m.start(), "port", port)
    for m in _HOST.finditer(text):
        if not _FILE.fullmatch(m.group(1)) or re.fullmatch(r"[\d.]+", m.group(1)):
            add(m.start(), "host", m.group(1))
    for m in _SERVICE.finditer(text):
        add(m.start(), "service", m.group(1) or m.group(2))
    for m in _PROJECT.finditer(text):
        add(m.start(), "project", m.group(1) or m.group(2))
    for m in _PERSON.finditer(text):
        add(m.start(), "person", m.group(1) or m.group(2))
    out: dict[str, Mention] = {}
    for _, m in sorted(found, key=lambda x: x[0]):
        out.setdefault(m.id, m)
    return list(out.values())


# ---------------------------------------------------------------------------------------------
# what the user said
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Statement:
    subject: str          # an entity id
    predicate: str
    value: str
    text: str

    @property
    def said(self) -> str:
        """The fact as a prompt shows it: what the value is of, spelt out, then the user's words
        ("Call the project atlas." alone left the small model making a folder named project)."""
        thing = self.subject.split(":", 1)[-1]
        what = f"the {thing}'s name is {self.value}" if self.predicate == "name" else \
            f"the {thing} is {self.value}"
        return f"the user said {what} (their words: \"{self.text}\")"


_VALUE = r"['\"`]?([\w][\w.:/@-]*)['\"`]?"
_SAID = (
    (re.compile(r"\bmy name is ([A-Z][\w-]+)", re.I), lambda m: ("person:user", "name", m.group(1))),
    (re.compile(r"\bcall me ([A-Z][\w-]+)", re.I), lambda m: ("person:user", "name", m.group(1))),
    (re.compile(r"\b(?:call|name)\s+(?:the|our|my|this)\s+([\w -]{2,30}?)\s+" + _VALUE, re.I),
     lambda m: (f"concept:{m.group(1).strip().lower()}", "name", m.group(2))),
    (re.compile(r"\b(?:the|our|my)\s+([\w -]{2,30}?)\s+(?:is|will be)\s+(?:called|named)\s+"
                + _VALUE, re.I),
     lambda m: (f"concept:{m.group(1).strip().lower()}", "name", m.group(2))),
    (re.compile(r"\bremember(?: that)?\s+(?:the|our|my)\s+([\w -]{2,40}?)\s+(?:is|=|are)\s+"
                + _VALUE, re.I),
     lambda m: (f"concept:{m.group(1).strip().lower()}", "value", m.group(2))),
)


def user_statements(text: str) -> list[Statement]:
    out: list[Statement] = []
    seen: set[tuple[str, str]] = set()
    for pattern, build in _SAID:
        for m in pattern.finditer(text or ""):
            subject, predicate, value = build(m)
            if value.lower() in _NOT_NAMES or (subject, predicate) in seen:
                continue
            seen.add((subject, predicate))
            out.append(Statement(subject, predicate, value.rstrip(".,;:!?"),
                                 m.group(0).strip()[:200]))
    return out


# ---------------------------------------------------------------------------------------------
# tool records
# ---------------------------------------------------------------------------------------------

@dataclass
class Observation:
    writes: list[str] = field(default_factory=list)     # files the call (said it) wrote
    folders: list[str] = field(default_factory=list)    # folders it made
    reads: list[str] = field(default_factory=list)      # files it read successfully
    settings: list[tuple[str, str, str]] = field(default_factory=list)   # (file, key, value)


_REDIRECT = re.compile(r"(?<![<&\d])>{1,2}\s*(['\"]?)([^\s;|&<>'\"]+)\1")
_SETTING = re.compile(r"^\s*[\"']?([A-Za-z_][\w.-]{0,40})[\"']?\s*[:=]\s*[\"']?([^\s\"',#]{1,80})",
                      re.M)
_INTERESTING = re.compile(r"port|host|name|version|url|user|owner|path|dir|db|database|env|mode|"
                          r"level|timeout|key|code|token|id$|secret|colou?r|value|count|total",
                          re.I)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def tool_observations(tool: str, arguments: dict, target: str, output: str,
                      error: str | None) -> Observation:
    """What one tool call shows; nothing from a failed call."""
    obs = Observation()
    if error:
        return obs
    if tool == "write_file":
        path = str(arguments.get("path") or target or "")
        if path:
            obs.writes.append(path)
    elif tool == "read_file":
        path = str(arguments.get("path") or target or "")
        if path:
            obs.reads.append(path)
            obs.settings += [(path, k, v) for k, v in _SETTING.findall(output or "")
                             if _INTERESTING.search(k)][:20]
    elif tool == "shell":
        command = str(arguments.get("command") or target or "")
        for m in _REDIRECT.finditer(command):
            if m.group(2) not in ("/dev/null", "&1", "&2"):
                obs.writes.append(m.group(2))
        words = _words(command)
        for i, w in enumerate(words):
            if w == "tee":
                obs.writes += [a for a in words[i + 1:i + 4] if not a.startswith("-")
                               and a not in ("|", ";", "&&")][:1]
            elif w == "touch":
                obs.writes += [a for a in words[i + 1:i + 3] if not a.startswith("-")
                               and _FILE.fullmatch(a)][:1]
            elif w == "mkdir":
                obs.folders += [a for a in words[i + 1:i + 3] if not a.startswith("-")
                                and a not in ("|", ";", "&&")][:1]
            elif w in ("cat", "head", "tail", "grep") and i + 1 < len(words):
                files = [a for a in words[i + 1:i + 4] if _FILE.fullmatch(a)]
                obs.reads += files[:1]
                # the lines shown are that one file's own (grep/head/tail show a part of it)
                if len(files) == 1 and not obs.settings:
                    obs.settings += [(files[0], k, v) for k, v in _SETTING.findall(output or "")
                                     if _INTERESTING.search(k)][:20]
    obs.writes = list(dict.fromkeys(p.strip() for p in obs.writes if p.strip()))
    obs.reads = list(dict.fromkeys(p for p in obs.reads if p not in obs.writes))
    return obs


# ---------------------------------------------------------------------------------------------
# matching a goal's words against what the world holds
# ---------------------------------------------------------------------------------------------

_KEY = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""a an the and or but of to in on at by for with from into about as is are was were
be been do does did you your yours i me my we our it its this that these those there here please can
could would should will what which who how when where why if not no yes all any some each one file
files folder write read show tell give find make created create wrote earlier previous previously
last yesterday today session before again same""".split())


def keywords(text: str) -> set[str]:
    """The content words of a text, singular, for matching a goal against entities and facts."""
    out = set()
    for w in _KEY.findall((text or "").lower()):
        if w in _STOP or len(w) < 2:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return out
