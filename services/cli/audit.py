"""`artoo tap …` (the bus inspector) and `artoo audit` (the auditor's report), DESIGN §8.

In the spirit of `salt-run state.event` and `circusctl listen`:

    artoo tap [--type T] [--task ID] [--role R] [--grep RE] [--json] [--count N]   live tail
    artoo tap stats [--window S] [--json]      proxy + capture counters, per-type rates, gaps, subs
    artoo tap log [filters] [--since T] [--until T] [--all] [--json] [--count N]   the audit log
    artoo tap timeline RUN_ID [--json]         one task's causal history as a tree
    artoo tap verify [--json]                  check the hash chain; exit 1 naming the first bad record
    artoo audit [--json] [--last] [--strict]   the auditor's on-demand report (operator socket)
"""
from __future__ import annotations

import datetime as dt
import json
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from protocol.bus import BusClient, BusTimeout
from protocol.envelope import Envelope, ProtocolError, decode
from protocol.settings import Settings, load_settings

from auditor import log as audit_log

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
_BIG = 1 << 30
_SUMMARY_FIELDS = ("directive", "status", "verdict", "approved", "intent", "summary", "question",
                   "answer", "text", "error", "reason", "op", "role")


def _fail(message: str, code: int = 2) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}")
    sys.exit(code)


def _settings() -> Settings:
    try:
        return load_settings()
    except ValueError as exc:
        _fail(str(exc))


# ----------------------------------------------------------------------------------------------
# filtering and formatting (shared by the live tail, the log reader and the timeline)
# ----------------------------------------------------------------------------------------------

def body_task(env: Envelope) -> str:
    body = env.body
    return str(body.get("task_id") or body.get("parent_task_id") or "") if isinstance(body,
                                                                                   dict) else ""


@dataclass
class EnvelopeFilter:
    types: tuple[str, ...] = ()
    task: str = ""
    roles: tuple[str, ...] = ()
    grep: Optional[re.Pattern] = None

    @classmethod
    def build(cls, types, task, roles, grep) -> "EnvelopeFilter":
        try:
            pattern = re.compile(grep) if grep else None
        except re.error as exc:
            raise click.BadParameter(f"--grep: {exc}") from None
        return cls(tuple(types or ()), task or "", tuple(roles or ()), pattern)

    @property
    def active(self) -> bool:
        return bool(self.types or self.task or self.roles or self.grep)

    def match(self, env: Envelope) -> bool:
        if self.types and env.type not in self.types:
            return False
        if self.roles and env.sender not in self.roles:
            return False
        if self.task and self.task not in (env.task, body_task(env)):
            return False
        if self.grep and not self.grep.search(json.dumps(env.to_wire(), default=str)):
            return False
        return True


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def summary(env: Envelope, width: int = 70) -> str:
    body = env.body if isinstance(env.body, dict) else {}
    parts = []
    for key in _SUMMARY_FIELDS:
        value = body.get(key)
        if value not in (None, "", [], {}):
            parts.append(f"{key}={value}" if not isinstance(value, str) else f"{key}={value!r}")
        if len(parts) == 2:
            break
    text = " ".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def format_line(env: Envelope) -> str:
    to = f"→{env.to}" if env.to else ""
    return (f"{_clock(env.ts)} {env.type:<20} {env.sender}{to} task={env.task} seq={env.seq} "
            f"node={env.node}  {summary(env)}").rstrip()


def wire_line(env: Envelope, **extra) -> str:
    return json.dumps({**env.to_wire(), **extra}, default=str)


# ----------------------------------------------------------------------------------------------
# live tail
# ----------------------------------------------------------------------------------------------

_filter_options = [
    click.option("--type", "types", multiple=True, metavar="TYPE", help="only this message type "
                                                                         "(repeatable)"),
    click.option("--task", default="", metavar="ID", help="only this task / run id"),
    click.option("--role", "roles", multiple=True, metavar="ROLE", help="only from this sender "
                                                                         "role (repeatable)"),
    click.option("--grep", default="", metavar="REGEX", help="only messages whose JSON matches"),
    click.option("--json", "as_json", is_flag=True, help="one JSON object per line"),
    click.option("--count", type=click.IntRange(min=0), default=0, help="stop after N messages"),
]


def filter_options(fn):
    for option in reversed(_filter_options):
        fn = option(fn)
    return fn


@click.group(invoke_without_command=True)
@filter_options
@click.pass_context
def tap(ctx: click.Context, types, task, roles, grep, as_json, count) -> None:
    """Live tail of every message on the bus (subcommands: stats, log, timeline, verify)."""
    if ctx.invoked_subcommand is not None:
        return
    flt = EnvelopeFilter.build(types, task, roles, grep)
    settings = _settings()
    done = threading.Event()
    seen = 0
    lock = threading.Lock()

    def show(env, _msg):
        nonlocal seen
        if not flt.match(env):
            return
        with lock:
            if done.is_set():
                return
            seen += 1
            click.echo(wire_line(env) if as_json else format_line(env))
            if count and seen >= count:
                done.set()

    client = BusClient("user", settings=settings, heartbeat=False)
    client.on("*", show, raw=True)
    try:
        client.start(timeout=5.0)
    except BusTimeout as exc:
        _fail(f"the bus is not reachable ({exc}); is the daemon up?")
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        client.stop()


# ----------------------------------------------------------------------------------------------
# stats
# ----------------------------------------------------------------------------------------------

@tap.command("stats")
@click.option("--window", default=2.0, show_default=True, help="seconds to sample the bus")
@click.option("--json", "as_json", is_flag=True)
def tap_stats(window: float, as_json: bool) -> None:
    """Proxy and capture counters, per-type rates, per-sender gaps and the subscriptions."""
    from services.runtime.bus import query_control
    settings = _settings()
    try:
        proxy = query_control(settings, "stats")
    except (TimeoutError, OSError) as exc:
        _fail(f"the bus proxy does not answer on its control socket ({exc}); is the daemon up?")
    try:
        capture = query_control(settings, "capture")
    except (TimeoutError, OSError):
        capture = {"ok": False}
    by_type: Counter = Counter()
    by_sender: Counter = Counter()
    beats: dict[str, dict] = {}
    lock = threading.Lock()

    def count(env, _msg):
        with lock:
            by_type[env.type] += 1
            by_sender[env.sender] += 1
            if env.type == "Heartbeat" and isinstance(env.body, dict):
                beats[env.node] = env.body

    client = BusClient("user", settings=settings, heartbeat=False)
    client.on("*", count, raw=True)
    try:
        client.start(timeout=5.0)
    except BusTimeout as exc:
        _fail(f"the bus is not reachable ({exc})")
    t0 = time.monotonic()
    time.sleep(max(0.1, window))   # sampling period, not a handshake
    elapsed = time.monotonic() - t0
    client.stop()
    with lock:
        rates = {t: round(n / elapsed, 2) for t, n in by_type.most_common()}
        senders = {s: round(n / elapsed, 2) for s, n in by_sender.most_common()}
        gaps: Counter = Counter()
        receivers = {}
        for node, hb in beats.items():
            for sender, n in (hb.get("gaps") or {}).items():
                gaps[sender] += int(n)
            receivers[node] = {"role": hb.get("role"), "gaps": sum((hb.get("gaps") or {}).values()),
                               "lost": hb.get("lost", 0), "unacked": hb.get("unacked", 0),
                               "rejected": sum((hb.get("rejected") or {}).values())}
    report = {"proxy": proxy.get("stats", {}), "capture": capture.get("capture"),
              "window_s": round(elapsed, 3), "rates_per_type": rates,
              "rates_per_sender": senders, "gaps_per_sender": dict(gaps.most_common()),
              "receivers": receivers}
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
        return
    p = report["proxy"]
    console.print(f"[bold]proxy[/bold] pid {p.get('pid')} up {p.get('uptime_s', 0):.0f}s: "
                  f"in {p.get('frontend_msgs_in', 0)} msgs / {p.get('frontend_bytes_in', 0)} B, "
                  f"out {p.get('backend_msgs_out', 0)} msgs / {p.get('backend_bytes_out', 0)} B")
    cap = report["capture"]
    if cap:
        console.print(f"[bold]capture[/bold] captured {cap['captured']}, acked by tap "
                      f"{cap['acked']}, buffered {cap['buffered']} ({cap['buffered_bytes']} B), "
                      f"dropped {cap['dropped']}, tap "
                      f"{'connected' if cap['tap_connected'] else '[red]not connected[/red]'}")
    else:
        console.print("[bold]capture[/bold] off (ARTOO_CAPTURE=0): the audit log is not fed")
    table = Table(title=f"rates over {elapsed:.1f}s", title_justify="left")
    table.add_column("type")
    table.add_column("msgs/s", justify="right")
    for t, r in rates.items():
        table.add_row(t, f"{r:.2f}")
    console.print(table)
    table = Table(title="gaps per sender (sum over receivers' heartbeats)", title_justify="left")
    table.add_column("sender node")
    table.add_column("missed", justify="right")
    for s, n in gaps.most_common():
        table.add_row(s, str(n))
    if not gaps:
        table.add_row("(none)", "0")
    console.print(table)
    table = Table(title="receivers", title_justify="left")
    for col in ("node", "role", "gaps", "lost", "unacked", "rejected"):
        table.add_column(col, justify="left" if col in ("node", "role") else "right")
    for node, r in sorted(receivers.items()):
        table.add_row(node, str(r["role"]), str(r["gaps"]), str(r["lost"]), str(r["unacked"]),
                      str(r["rejected"]))
    console.print(table)
    subs = (cap or {}).get("subscriptions") or []
    console.print(f"[bold]subscriptions[/bold] ({len(subs)} prefixes): "
                  + (", ".join(s or "<everything>" for s in subs) or "(none)"))


# ----------------------------------------------------------------------------------------------
# the audit log
# ----------------------------------------------------------------------------------------------

_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")


def parse_when(text: str, now: float | None = None) -> float:
    """Epoch seconds from '1795300000', '10m' / '2h' / '1d' ago, ISO 8601, or HH:MM[:SS] today."""
    now = time.time() if now is None else now
    text = text.strip()
    m = _REL.match(text)
    if m:
        return now - float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", text):
        today = dt.datetime.fromtimestamp(now).date().isoformat()
        text = f"{today}T{text}"
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise click.BadParameter(f"cannot read {text!r} as a time (try 10m, 2h, 14:05, "
                                 f"2026-11-22T14:05:00 or epoch seconds)") from None


def decoded(records: Iterable[audit_log.Record]) -> Iterator[tuple[audit_log.Record,
                                                                     Optional[Envelope], str]]:
    """(record, envelope or None, problem) for every record."""
    for rec in records:
        if rec.kind != audit_log.MSG:
            yield rec, None, ""
            continue
        try:
            _topic, env = decode([rec.topic, rec.payload], _BIG)
            yield rec, env, ""
        except ProtocolError as exc:
            yield rec, None, str(exc)


def _record_line(rec: audit_log.Record, problem: str, as_json: bool) -> str:
    meta = rec.meta()
    if as_json:
        out = {"seq": rec.seq, "recv_ts": rec.recv_ts, "kind": rec.kind_name,
               "topic": rec.topic.decode("utf-8", "replace")}
        if meta:
            out["meta"] = meta
        elif rec.kind == audit_log.SUB:
            out["subscription"] = ("+" if rec.payload[:1] == b"\x01" else "-") + \
                rec.payload[1:].decode("utf-8", "replace")
        else:
            out["payload_hex"] = rec.payload[:256].hex()
        if problem:
            out["problem"] = problem
        return json.dumps(out, default=str)
    head = f"{_clock(rec.recv_ts)} #{rec.seq:<8}"
    if rec.kind == audit_log.SUB:
        sign = "subscribe" if rec.payload[:1] == b"\x01" else "unsubscribe"
        return f"{head} [{sign}] {rec.payload[1:].decode('utf-8', 'replace') or '<everything>'}"
    if rec.kind in (audit_log.GAP, audit_log.REPAIR):
        return f"{head} [{rec.kind_name.upper()}] {json.dumps(meta, default=str)}"
    return f"{head} [{rec.kind_name}: {problem or 'not an envelope'}] topic=" \
           f"{rec.topic[:60].decode('utf-8', 'replace')} {len(rec.payload)} bytes"


def log_directory(settings: Settings) -> Path:
    return settings.audit_dir / "log"


@tap.command("log")
@filter_options
@click.option("--since", default="", help="from this time (10m, 2h, 14:05, ISO 8601, epoch)")
@click.option("--until", default="", help="up to this time")
@click.option("--all", "show_all", is_flag=True,
              help="also subscription changes and undecodable frames")
def tap_log(types, task, roles, grep, as_json, count, since, until, show_all) -> None:
    """Read the audit log with the live tail's filters plus a time range."""
    settings = _settings()
    flt = EnvelopeFilter.build(types, task, roles, grep)
    since_ts = parse_when(since) if since else None
    until_ts = parse_when(until) if until else None
    directory = log_directory(settings)
    if not audit_log.list_segments(directory):
        _fail(f"no audit log under {directory} (is the tap running?)", 1)
    shown = 0
    for rec, env, problem in decoded(audit_log.iter_records(directory, since_ts, until_ts)):
        if env is None:
            special = rec.kind in (audit_log.GAP, audit_log.REPAIR)
            if flt.active or not (show_all or special):
                continue
            click.echo(_record_line(rec, problem, as_json))
        else:
            if not flt.match(env):
                continue
            click.echo(wire_line(env, log_seq=rec.seq, recv_ts=rec.recv_ts) if as_json
                       else f"#{rec.seq:<8} {format_line(env)}")
        shown += 1
        if count and shown >= count:
            break


# ----------------------------------------------------------------------------------------------
# timeline
# ----------------------------------------------------------------------------------------------

@dataclass
class _Event:
    env: Envelope
    sends: int = 1
    acks: list = field(default_factory=list)       # (role, ts)

    def subtask(self) -> str:
        body = self.env.body if isinstance(self.env.body, dict) else {}
        return str(body.get("subtask_id") or "")


def build_timeline(run_id: str, records: Iterable[audit_log.Record]) -> dict:
    """The task's messages as {start, events, subtasks}: acks and re-sends folded into the message
    they belong to, subtask traffic grouped under its subtask."""
    events: dict[str, _Event] = {}
    order: list[_Event] = []
    acks: list[Envelope] = []
    for _rec, env, _problem in decoded(records):
        if env is None or env.type in ("Heartbeat", "Hello"):
            continue
        if run_id not in (env.task, body_task(env)):
            continue
        if env.type == "Ack":
            acks.append(env)
            continue
        if env.id in events:
            events[env.id].sends += 1
            continue
        ev = events[env.id] = _Event(env)
        order.append(ev)
    for ack in acks:
        target = events.get(ack.corr or "")
        if target is not None:
            target.acks.append((ack.sender, ack.ts, bool(ack.body.get("ok", True))))
    start = order[0].env.ts if order else 0.0
    top: list = []
    groups: dict[str, list] = {}
    for ev in order:
        sid = ev.subtask()
        if sid:
            if sid not in groups:
                groups[sid] = []
                top.append(("subtask", sid))
            groups[sid].append(ev)
        else:
            top.append(("event", ev))

    def item(ev: _Event) -> dict:
        e = ev.env
        return {"t": round(e.ts - start, 3), "ts": e.ts, "type": e.type, "from": e.sender,
                "node": e.node, "to": e.to, "id": e.id, "summary": summary(e, 90),
                "sends": ev.sends,
                "acks": [{"by": r, "after_ms": round((t - e.ts) * 1000, 1), "ok": ok}
                         for r, t, ok in ev.acks]}

    out = []
    for kind, value in top:
        if kind == "event":
            out.append(item(value))
        else:
            evs = groups[value]
            intent = next((ev.env.body.get("intent") for ev in evs
                           if isinstance(ev.env.body, dict) and ev.env.body.get("intent")), "")
            out.append({"subtask": value, "intent": intent, "t": round(evs[0].env.ts - start, 3),
                        "events": [item(ev) for ev in evs]})
    end = max((ev.env.ts for ev in order), default=start)
    return {"run_id": run_id, "start": start, "duration_s": round(end - start, 3),
            "messages": len(order), "timeline": out}


def _event_label(e: dict) -> str:
    to = f" → {e['to']}" if e["to"] else ""
    acks = ""
    if e["acks"]:
        acks = " [dim](acked by " + ", ".join(
            f"{a['by']} +{a['after_ms']:.0f}ms" + ("" if a["ok"] else " with error")
            for a in e["acks"]) + ")[/dim]"
    resent = f" [yellow]×{e['sends']} sent[/yellow]" if e["sends"] > 1 else ""
    return (f"[cyan]+{e['t']:.3f}s[/cyan] {escape(e['from'])}{escape(to)}  [bold]{e['type']}"
            f"[/bold] {escape(e['summary'])}{resent}{acks}")


@tap.command("timeline")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
def tap_timeline(run_id: str, as_json: bool) -> None:
    """The whole causal history of one task from the audit log, as a tree."""
    settings = _settings()
    directory = log_directory(settings)
    if not audit_log.list_segments(directory):
        _fail(f"no audit log under {directory} (is the tap running?)", 1)
    tl = build_timeline(run_id, audit_log.iter_records(directory))
    if not tl["messages"]:
        _fail(f"no message about task {run_id!r} in the audit log", 1)
    if as_json:
        click.echo(json.dumps(tl, indent=2, default=str))
        return
    tree = Tree(f"[bold]task {escape(run_id)}[/bold] — {tl['messages']} messages over "
                f"{tl['duration_s']:.3f}s, from {_clock(tl['start'])}")
    for entry in tl["timeline"]:
        if "subtask" in entry:
            branch = tree.add(f"[cyan]+{entry['t']:.3f}s[/cyan] [magenta]subtask "
                              f"{escape(entry['subtask'])}[/magenta] {escape(repr(entry['intent']))}")
            for e in entry["events"]:
                branch.add(_event_label(e))
        else:
            tree.add(_event_label(entry))
    console.print(tree)


# ----------------------------------------------------------------------------------------------
# verify
# ----------------------------------------------------------------------------------------------

@tap.command("verify")
@click.option("--json", "as_json", is_flag=True)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="log directory (default: $ARTOO_HOME/audit/log)")
def tap_verify(as_json: bool, directory: Optional[Path]) -> None:
    """Check the hash chain of the audit log; exit 1 naming the first bad record."""
    directory = directory or log_directory(_settings())
    if not directory.is_dir():
        _fail(f"no audit log under {directory}", 1)
    res = audit_log.verify(directory)
    if as_json:
        click.echo(json.dumps(res.as_dict(), indent=2))
    elif res.ok:
        rate = res.records / res.elapsed_s if res.elapsed_s > 0 else 0.0
        console.print(f"[green]OK[/green] {res.records} records in {res.segments} segment(s), "
                      f"{res.bytes} bytes, chain intact up to seq {res.last_seq} "
                      f"({res.elapsed_s:.2f}s, {rate:,.0f} records/s)")
    else:
        console.print(f"[red]DAMAGED[/red] first bad record: seq {res.first_bad_seq} in "
                      f"{res.segment} at byte {res.offset}: {escape(res.reason)}\n"
                      f"{res.records} records before it verified (chain intact up to seq "
                      f"{res.last_seq})")
    for warning in res.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    if not res.ok:
        sys.exit(1)


# ----------------------------------------------------------------------------------------------
# audit
# ----------------------------------------------------------------------------------------------

def _t(value) -> str:
    return _clock(value) if isinstance(value, (int, float)) else "never"


def _violation(v: dict) -> str:
    return (f"{_t(v.get('time'))}  {v.get('sender')} ({v.get('node')}) → "
            f"{v.get('to') or 'everyone'}  {v.get('type')}  task {v.get('task')}\n"
            f"      {v.get('reason')}")


def _convergence(c: dict) -> str:
    extra = ""
    if c.get("trend"):
        extra = f"; L by round: {c['trend']}"
    return (f"{_t(c.get('time'))}  {c.get('kind')}  task {c.get('task')} round {c.get('round')}"
            + (f" directive {c['directive']} ∇L {c['grad_l']:+}" if "grad_l" in c else "")
            + f"\n      {c.get('detail', '')}{extra}")


def _drift(a: dict) -> str:
    return (f"{a.get('role')} {a.get('metric')} = {a.get('value')} ({a.get('direction')}) vs its "
            f"baseline {a.get('baseline')} over {a.get('baseline_windows')} window(s); "
            f"{a.get('samples')} samples")


def _gap(g: dict) -> str:
    who = f" from {g['sender']}" if g.get("sender") else ""
    return (f"{g.get('kind')}: {g.get('receiver')} — {g.get('count')}{who} "
            f"({_t(g.get('first_at'))} – {_t(g.get('last_at'))})")


def _missing(m: dict) -> str:
    text = f"{m.get('role')}[{m.get('instance')}] {m.get('state')}: last heartbeat " \
           f"{_t(m.get('last_seen'))}, noticed {_t(m.get('detected_at'))}"
    if m.get("state") == "recovered":
        text += f", back after {m.get('silent_s')}s" + (" (restarted)" if m.get("restarted")
                                                        else "")
    return text


def _missing_host(m: dict) -> str:
    text = (f"host {m.get('host')} ({', '.join(m.get('roles') or [])}) {m.get('state')}: last "
            f"heartbeat {_t(m.get('last_seen'))}, noticed {_t(m.get('detected_at'))}")
    if m.get("state") == "recovered":
        text += f", back after {m.get('silent_s')}s"
    return text


_LISTS = (
    ("boundary_violations", "Boundary violations", _violation),
    ("convergence_failures", "Convergence failures", _convergence),
    ("drift_alerts", "Role drift", _drift),
    ("bus_gaps", "Bus gaps", _gap),
    ("missing_roles", "Missing roles", _missing),
    ("missing_hosts", "Missing hosts", _missing_host),
)


def print_report(rep: dict) -> None:
    """The report for a human: header, every anomaly list (or 'none'), role statistics."""
    start, end = rep["window_start"], rep["window_end"]
    console.print(f"[bold]audit report[/bold] {rep['report_id']} ({rep['trigger']}), window "
                  f"{_clock(start)} – {_clock(end)} ({end - start:.0f}s): "
                  f"{rep['messages_observed']} messages, {rep['tasks_observed']} tasks, "
                  f"{rep.get('corrections', 0)} corrections, gap trends "
                  f"{rep.get('gap_trends') or {}}, final results {rep.get('final_results') or {}}")
    for key, title, fmt in _LISTS:
        items = rep.get(key) or []
        omitted = (rep.get("omitted") or {}).get(key, 0)
        if not items:
            console.print(f"[green]{title}: none[/green]")
            continue
        console.print(f"[bold red]{title}: {len(items)}[/bold red]"
                      + (f" (+{omitted} not listed)" if omitted else ""))
        for item in items:
            console.print(f"  • {escape(fmt(item))}")
    stats = rep.get("role_stats") or {}
    if stats:
        table = Table(title="role statistics (this window)", title_justify="left")
        for col in ("role", "messages", "metrics: value/baseline (samples)", "restarts"):
            table.add_column(col, overflow="fold")
        for role, st in sorted(stats.items()):
            metrics = "; ".join(
                f"{m} {v['value']}" + (f"/{v['baseline']}" if v.get("baseline") is not None
                                       else "") + f" ({v['samples']})"
                for m, v in (st.get("metrics") or {}).items())
            table.add_row(role, str(st.get("messages", 0)), metrics or "-",
                          str(st.get("restarts", 0)))
        console.print(table)


def _latest_report(settings: Settings) -> Optional[dict]:
    from auditor.auditor import reports_dir
    files = sorted(p for p in reports_dir(settings).glob("*.json") if p.name != "baseline.json")
    if not files:
        return None
    return json.loads(max(files, key=lambda p: p.stat().st_mtime).read_text())


@click.command("audit")
@click.option("--json", "as_json", is_flag=True, help="the AuditReport as JSON")
@click.option("--last", is_flag=True, help="show the newest saved report instead of asking the "
                                           "auditor")
@click.option("--strict", is_flag=True, help="exit 1 when any anomaly list is not empty")
def audit(as_json: bool, last: bool, strict: bool) -> None:
    """The auditor's report to the operator: every anomaly list of the current window."""
    from auditor.operator import query, socket_path
    settings = _settings()
    if last:
        rep = _latest_report(settings)
        if rep is None:
            _fail("no saved audit report yet", 1)
    else:
        try:
            rep = query(settings)["report"]
        except FileNotFoundError:
            _fail(f"the auditor is not running (no socket {socket_path(settings)}); "
                  f"`artoo audit --last` shows the newest saved report")
        except (OSError, RuntimeError, ValueError) as exc:
            _fail(f"the auditor did not answer: {exc}")
    if as_json:
        click.echo(json.dumps(rep, indent=2, default=str))
    else:
        print_report(rep)
    if strict and any(rep.get(key) for key, _title, _fmt in _LISTS):
        sys.exit(1)


def register(main: click.Group) -> None:
    main.add_command(tap)
    main.add_command(audit)
