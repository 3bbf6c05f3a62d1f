"""What the per-task paths of the world model look up, held in memory so that none of them scans
a sub-database that grows with every task (episodes, goals, entities, facts).

Before it, a goal's projection read and unpacked every episode, entity and fact ever recorded, and
closing a task every goal: the perceiver's wait for its projection grew with the daemon's history
(`benchmarks/bench_world.py`: 2.1 ms at 100 tasks, 67 ms at 3,000). The index is built from one
scan of the store when the world opens it, and kept current by `WorldStore` with every value a
committed transaction wrote (the world process is the store's only writer, and nothing in it is
ever deleted). It holds ids, words and each fact's few ranking inputs, never whole records: the
projection ranks the facts a lookup gives from those inputs and reads only the chosen ones (and
the candidate entities) from the store — the same projection as ranking everything.
"""
from __future__ import annotations

import bisect
import sys
from collections import Counter, defaultdict
from typing import Any, Iterable, Iterator, NamedTuple

from services.runtime import worldfacts as X


def name_words(name: str) -> set[str]:
    """The words an entity's name is matched on (a path's parts: `a/b.csv` → a, b, csv)."""
    return X.keywords(name.replace("/", " ").replace(".", " "))


def fact_words(f: dict) -> set[str]:
    return X.keywords(" ".join((f["subject"].replace("/", " ").replace(".", " "),
                                f["predicate"], f["object"], f["text"])))


class FactMeta(NamedTuple):
    """What ranks a fact in a projection (model.fact_rank), kept so that ranking the candidates
    reads none of them from the store: only the chosen few are."""
    shown: bool          # a fact, or an answer artoo gave that no check confirmed
    forgotten: bool
    valid_at: float
    invalid_at: float | None
    scope: str
    subject: str


def fact_meta(f: dict) -> FactMeta:
    # facts, and the answers artoo gave that no check confirmed: the user refers to what they
    # were told ("the host you found earlier"), so it is shown, marked as such
    told = f["kind"] == "claim" and f["predicate"] == "answer" and \
        f.get("status") == "unverified"
    return FactMeta(f["kind"] == "fact" or told, bool(f.get("forgotten")), f["valid_at"],
                    f["invalid_at"], sys.intern(f.get("scope", "")), sys.intern(f["subject"]))


class WorldIndex:
    """task → workspace; schedule session → its runs; run id → the goals it carries out; intent
    slug → its latest proposal; keyword → entities and facts; subject → facts; workspace → its
    facts in valid-time order; each fact's ranking inputs. Only added to: an entity's name and a
    fact's words never change once written (a fact is invalidated or forgotten by a new value of
    its record, whose inputs replace the old ones)."""

    def __init__(self) -> None:
        self.workspace: dict[str, str] = {}
        self.session_runs: dict[str, dict[str, None]] = defaultdict(dict)  # ordered set
        self.goal_runs: dict[str, set[str]] = defaultdict(set)
        self.slug_proposed: dict[str, float] = {}
        self.entity_words: dict[str, set[str]] = defaultdict(set)
        self.fact_words: dict[str, set[str]] = defaultdict(set)
        self.fact_subject: dict[str, set[str]] = defaultdict(set)
        self.scope_facts: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self.fact_meta: dict[str, FactMeta] = {}
        self._entities: set[str] = set()

    def put(self, db: str, key: str, value: Any) -> None:
        """One value a committed transaction wrote."""
        add = self._ADD.get(db)
        if add is not None and isinstance(value, dict):
            add(self, key, value)

    def _episode(self, task: str, ep: dict) -> None:
        self.workspace[task] = ep.get("workspace") or ""     # "": the default workspace
        session = ep.get("session") or ""
        if session.startswith("schedule:"):
            self.session_runs[session][task] = None

    def _goal(self, gid: str, goal: dict) -> None:
        run = (goal.get("link") or {}).get("run_id")
        if run:
            self.goal_runs[run].add(gid)
        slug = (goal.get("action") or {}).get("slug")
        if slug:
            self.slug_proposed[slug] = max(self.slug_proposed.get(slug, 0.0),
                                           goal.get("created_at") or 0.0)

    def _entity(self, eid: str, ent: dict) -> None:
        if eid in self._entities:
            return
        self._entities.add(eid)
        for w in name_words(ent.get("name", "")):
            self.entity_words[w].add(eid)

    def _fact(self, fid: str, f: dict) -> None:
        known = fid in self.fact_meta
        self.fact_meta[fid] = fact_meta(f)       # invalidated or forgotten since: current here
        if known:
            return
        for w in fact_words(f):
            self.fact_words[w].add(fid)
        self.fact_subject[f["subject"]].add(fid)
        if f.get("scope"):
            bisect.insort(self.scope_facts[f["scope"]], (f["valid_at"], fid))

    _ADD = {"episodes": _episode, "goals": _goal, "entities": _entity, "facts": _fact}

    # -- lookups -------------------------------------------------------------------------------
    def entities_for(self, words: Iterable[str], named: Iterable[str]) -> set[str]:
        """Every entity whose name shares a word, and the named ones (when known)."""
        out = {eid for eid in named if eid in self._entities}
        for w in words:
            out |= self.entity_words.get(w, set())
        return out

    def facts_for(self, words: Iterable[str], subjects: Iterable[str]) -> Counter:
        """fact id → how many of the words it shares, for every fact sharing one or about one
        of the subjects (those with 0)."""
        shared: Counter = Counter()
        for w in words:
            shared.update(self.fact_words.get(w, ()))
        for s in subjects:
            for fid in self.fact_subject.get(s, ()):
                shared[fid] += 0
        return shared

    def newest_in(self, scope: str) -> Iterator[tuple[float, str]]:
        """A workspace's facts, latest valid time first."""
        return reversed(self.scope_facts.get(scope, []))


def build(dbs: dict[str, Iterable[tuple[str, Any]]]) -> WorldIndex:
    """The index of a store, from one scan of each sub-database it covers."""
    index = WorldIndex()
    for db, rows in dbs.items():
        for key, value in rows:
            index.put(db, key, value)
    return index
