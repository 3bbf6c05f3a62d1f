"""`artoo memory ls | show ID | remember TEXT | forget ID | stats`: the operator's view of MKCT.

Every command is a MemoryQuery request to the running memory process over the bus (the process owns
the LMDB file; nothing here opens it). Tables for people, `--json` for scripts.
"""
from __future__ import annotations

import time

import click
from rich.table import Table

from protocol.messages import Megram, MemoryQuery, MemoryResult

from . import storequery
from .storequery import clip, console, echo_json


def ask(query: MemoryQuery, timeout: float | None = None) -> MemoryResult:
    return storequery.ask(query, "memory", timeout)


def _age(ts: float | None) -> str:
    if not ts:
        return "-"
    s = max(0.0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit}" if s / size >= 10 else f"{s / size:.1f}{unit}"
    return f"{s:.0f}s"


_ACTION_STYLE = {"Exploit": "green", "Avoid": "red", "Caution": "yellow", "Ignore": "dim"}


def _action(name: str) -> str:
    return f"[{_ACTION_STYLE.get(name, 'white')}]{name}[/]"


def _megram_table(megrams: list[Megram], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("id", "lvl", "state", "f", "σ", "k", "age", "att", "dec", "content"):
        table.add_column(col, justify="right" if col in ("f", "σ", "k", "att", "dec", "age")
                         else "left", overflow="fold" if col == "content" else "ellipsis")
    for m in megrams:
        mark = "*" if m.consolidated_into else ""
        table.add_row(m.id[:12], m.level + mark, m.state or "-", f"{m.f:.2f}", f"{m.sigma:+.2f}",
                      f"{m.k:g}", _age(m.created_at),
                      "-" if m.live_attention is None else f"{m.live_attention:.3f}",
                      "-" if m.live_decision is None else f"{m.live_decision:+.3f}",
                      clip(m.content, 70))
    return table


@click.group("memory")
def memory() -> None:
    """The MKCT memory: potentials per tag, Megrams, operator rules."""


@memory.command("ls")
@click.option("--space", default="", help="only tags whose space starts with this")
@click.option("--entity", default="", help="only tags whose entity starts with this")
@click.option("--level", type=click.Choice(["M", "K", "C", "T"]), default=None,
              help="only Megrams of this level")
@click.option("-n", "limit", default=50, show_default=True, help="at most this many rows")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def ls_cmd(space: str, entity: str, level: str | None, limit: int, as_json: bool) -> None:
    """Tags (space, entity) with their counts, attention, decision and action, strongest first.
    With both --space and --entity, also the Megrams of that tag (newest first)."""
    res = ask(MemoryQuery(op="list", space=space, entity=entity, level=level, n=limit))
    if as_json:
        echo_json({"groups": res.groups, "total_groups": res.stats.get("groups", 0),
                    "megrams": [m.model_dump() for m in res.megrams]})
        return
    total = res.stats.get("groups", len(res.groups))
    table = Table(title=f"memory: {len(res.groups)} of {total} tag(s)", title_justify="left")
    for col in ("space", "entity", "M", "K", "C", "T", "attention", "decision", "action",
                "newest"):
        table.add_column(col, justify="left" if col in ("space", "entity", "action")
                         else "right")
    for g in res.groups:
        lv = g.get("levels", {})
        table.add_row(clip(g["space"], 40), clip(g["entity"], 40),
                      *(str(lv.get(x, 0) or "") for x in "MKCT"),
                      f"{g['attention']:.3f}", f"{g['decision']:+.3f}", _action(g["action"]),
                      _age(g.get("newest")))
    console.print(table)
    if res.megrams:
        console.print(_megram_table(res.megrams, f"Megrams of {space} / {entity} "
                                                 f"(* = consolidated into a rule)"))


@memory.command("show")
@click.argument("megram_id")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def show_cmd(megram_id: str, as_json: bool) -> None:
    """One Megram by id (or a unique id prefix), with its lifecycle and its tag's potentials."""
    res = ask(MemoryQuery(op="show", id=megram_id))
    m = res.megrams[0]
    if as_json:
        echo_json({"megram": m.model_dump(), **res.stats})
        return
    group = res.stats.get("group", {})
    table = Table(show_header=False, title=f"Megram {m.id}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = [("level", m.level), ("tag", f"{m.space} / {m.entity}"), ("state", m.state or "-"),
            ("f / σ / k", f"{m.f:.2f} / {m.sigma:+.2f} / {m.k:g}"),
            ("created", f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(m.created_at))} "
                        f"({_age(m.created_at)} ago)"),
            ("recalled", _age(m.last_recalled_at) + " ago" if m.last_recalled_at else "never"),
            ("live att / dec", f"{m.live_attention or 0:.4f} / {m.live_decision or 0:+.4f}"),
            ("tag potentials", f"att {group.get('attention', 0):.3f}  dec "
                               f"{group.get('decision', 0):+.3f}  → "
                               f"{_action(group.get('action', 'Ignore'))} "
                               f"({group.get('count', 0)} Megrams)")]
    if m.consolidated_into:
        rows.append(("consolidated into", m.consolidated_into))
    life = res.stats.get("lifecycle") or {}
    for key, value in life.items():
        if key in ("sources",):
            value = f"{life.get('source_count', len(value))} Megrams ({', '.join(v[:12] for v in value[:5])}…)"
        elif key.endswith("_at"):
            value = f"{_age(value)} ago"
        rows.append((key.replace("_", " "), str(value)))
    rows.append(("content", m.content))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


@memory.command("remember")
@click.argument("text", nargs=-1, required=True)
@click.option("--level", type=click.Choice(["M", "K", "C", "T"]), default="C", show_default=True,
              help="C/T: timeless rule; M/K: decaying experience")
@click.option("--space", default="global:user", show_default=True,
              help="tag space, e.g. intent:<slug> or tool:<name>")
@click.option("--entity", default="env:local", show_default=True)
@click.option("--sigma", type=click.FloatRange(-1.0, 1.0), default=None,
              help="valence in [-1, 1] (default +1; negative = a rule to avoid / a correction)")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def remember_cmd(text: tuple[str, ...], level: str, space: str, entity: str,
                 sigma: float | None, as_json: bool) -> None:
    """Inject a Megram by hand (operator rules reach every planner calibration from global:user)."""
    res = ask(MemoryQuery(op="remember", text=" ".join(text), level=level, space=space,
                          entity=entity, sigma=sigma))
    m = res.megrams[0]
    if as_json:
        echo_json(m.model_dump())
        return
    console.print(f"remembered [bold]{m.id[:12]}[/bold] {m.level} {m.space} / {m.entity} "
                  f"σ {m.sigma:+.2f}: {clip(m.content, 80)}")


@memory.command("forget")
@click.argument("megram_id")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def forget_cmd(megram_id: str, as_json: bool) -> None:
    """Delete one Megram by id (or a unique id prefix). To correct a rule while keeping history,
    remember a negative-σ Megram on the same tag instead."""
    res = ask(MemoryQuery(op="forget", id=megram_id))
    m = res.megrams[0]
    if as_json:
        echo_json(m.model_dump())
        return
    console.print(f"forgot [bold]{m.id[:12]}[/bold] {m.level} {m.space} / {m.entity}: "
                  f"{clip(m.content, 80)}")


@memory.command("stats")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def stats_cmd(as_json: bool) -> None:
    """Counts per level, store size, writer and Dreamer figures, and the C/T rules."""
    res = ask(MemoryQuery(op="stats", n=100))
    st = res.stats
    if as_json:
        echo_json({"stats": st, "rules": [s.model_dump() for s in res.sops]})
        return
    lv = st.get("levels", {})
    console.print(f"[bold]{st.get('megrams', 0)}[/bold] Megrams in {st.get('tags', 0)} tags — "
                  + "  ".join(f"{x}: {lv.get(x, 0)}" for x in "MKCT"))
    console.print(f"store {st.get('path')}: {st.get('file_bytes', 0) / 1e6:.1f} MB of "
                  f"{st.get('map_size', 0) / 1e6:.0f} MB map; {st.get('commits', 0)} commits, "
                  f"{st.get('written', 0)} Megrams written since start")
    dreamer = st.get("dreamer", {})
    last = dreamer.get("last") or {}
    if last:
        console.print(f"Dreamer: {dreamer.get('cycles', 0)} cycle(s); last ({last['trigger']}, "
                      f"{_age(last['at'])} ago): scanned {last['scanned']}, gc "
                      f"{last['gc_deleted']}, demoted {last['demoted']}, promoted "
                      f"{last['promoted']} in {last['elapsed_ms']:.0f} ms"
                      + (f" — [red]{last['error']}[/red]" if last.get("error") else ""))
    else:
        console.print("Dreamer: no cycle yet")
    if res.sops:
        table = Table(title="rules (C/T)", title_justify="left")
        for col in ("id", "lvl", "σ", "tag", "content"):
            table.add_column(col, overflow="fold" if col == "content" else "ellipsis")
        for s in res.sops:
            table.add_row(s.id[:12], s.level, f"{s.sigma:+.1f}", clip(f"{s.space} / {s.entity}", 40),
                          clip(s.content, 80))
        console.print(table)


def register(main: click.Group) -> None:
    main.add_command(memory)
