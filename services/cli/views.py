"""Console renderings of the daemon's reports (the live run has its own renderer, render.py)."""
from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()


def print_status(report: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
        return
    table = Table(title=f"artoo daemon — {report['home']}", title_justify="left")
    for col in ("role", "inst", "state", "pid", "uptime", "supervisor", "gaps", "rejected",
                "unacked", "lost", "in-flight"):
        table.add_column(col, justify="right" if col not in ("role", "state", "supervisor") else "left")
    for r in report["roles"]:
        state = "[green]alive[/green]" if r["alive"] else "[red]missing[/red]"
        table.add_row(r["role"], str(r["instance"]), state, str(r["pid"] or "-"),
                      f"{r['uptime_s']:.0f}s" if r["alive"] else "-", r["supervisor_state"] or "-",
                      str(r["gaps"]), str(r["rejected"]), str(r["unacked"]), str(r["lost"]),
                      str(r["in_flight"]))
    # piped output (no terminal) gets room for every column instead of 80-column truncation
    (console if console.is_terminal else Console(width=160)).print(table)
    backends = report.get("llm_backends")
    if backends:
        console.print("LLM backends: " + ", ".join(f"{k}={v}" for k, v in backends.items()))
    if report.get("bus"):
        console.print(f"Bus: {report['bus']} (this host: {report.get('host', '?')})",
                      highlight=False)
    curve = next((((r.get("info") or {}).get("proxy") or {}).get("curve")
                  for r in report["roles"] if r["role"] == "bus" and r.get("info")), None)
    if curve:
        console.print(f"CURVE: {len(curve['authorized'])} authorized host key(s) "
                      f"({', '.join(curve['authorized'])}); {curve['admitted']} handshake(s) "
                      f"admitted, {curve['refused']} refused", highlight=False)
    if report.get("bus_signing"):
        console.print(f"Bus signing: {report['bus_signing']}")
    if report.get("bus_hot_path"):
        console.print(f"Bus hot path: {report['bus_hot_path']}")
    if report.get("cpu_latency"):
        console.print(f"CPU wake-ups: {report['cpu_latency']}", highlight=False)
    box = report.get("sandbox")
    if box:
        colour = {"bubblewrap": "green", "off": "yellow"}.get(box["mode"], "red")
        limit = f"; process limit: {box['process_limit']}" if box.get("process_limit") else ""
        console.print(f"Tool sandbox: [{colour}]{box['mode']}[/{colour}] — "
                      f"{escape(box['detail'])}{limit}", highlight=False)
