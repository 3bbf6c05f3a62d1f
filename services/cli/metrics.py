"""`artoo metrics`: what the daemon's Prometheus endpoint serves (services/runtime/metrics.py).

Prints the same text a Prometheus server scrapes from http://127.0.0.1:$ARTOO_METRICS_PORT/metrics
(comments left out unless --help-lines; `--grep` keeps the metrics whose name contains a word)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import click

from protocol.settings import load_settings
from services.runtime.metrics import port_file

from . import fail


def register(main: click.Group) -> None:
    main.add_command(metrics)


def endpoint(settings) -> str:
    """The running exporter's address (its port file), else the configured one."""
    try:
        where = port_file(settings).read_text().strip()
    except OSError:
        where = f"{settings.metrics_addr}:{settings.metrics_port}"
    return f"http://{where}/metrics"


def scrape(settings, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(endpoint(settings), timeout=timeout) as resp:
        return resp.read().decode()


def parse(text: str) -> list[tuple[str, dict, float]]:
    """The samples of an exposition text: (name, labels, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, labels = head, {}
        if "{" in head:
            name, _, rest = head.partition("{")
            for part in _split_labels(rest.rstrip("}")):
                key, _, val = part.partition("=")
                labels[key] = json.loads(val) if val.startswith('"') else val
        try:
            out.append((name, labels, float(value)))
        except ValueError:
            continue
    return out


def _split_labels(text: str) -> list[str]:
    parts, cur, quoted, escaped = [], "", False, False
    for ch in text:
        if escaped:
            cur, escaped = cur + ch, False
            continue
        if ch == "\\":
            cur, escaped = cur + ch, True
            continue
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    if cur:
        parts.append(cur)
    return parts


@click.command()
@click.option("--grep", "word", default="", help="only metrics whose name contains this")
@click.option("--help-lines", is_flag=True, help="keep the # HELP / # TYPE lines")
@click.option("--json", "as_json", is_flag=True, help="samples as JSON: name, labels, value")
def metrics(word: str, help_lines: bool, as_json: bool) -> None:
    """The daemon's metrics, as Prometheus scrapes them (the `metrics` program)."""
    settings = load_settings()
    try:
        text = scrape(settings)
    except (OSError, urllib.error.URLError) as exc:
        fail(f"no metrics endpoint at {endpoint(settings)} ({exc}); is the daemon running? "
             f"(artoo up)")
    if as_json:
        samples = [{"name": n, "labels": l, "value": v} for n, l, v in parse(text)
                   if word in n]
        click.echo(json.dumps(samples, indent=1))
        return
    for line in text.splitlines():
        if line.startswith("#"):
            if help_lines and (not word or word in line):
                click.echo(line)
            continue
        if line and word in line.split("{", 1)[0].split(" ", 1)[0]:
            click.echo(line)
