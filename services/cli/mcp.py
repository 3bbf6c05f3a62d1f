"""`artoo mcp`: the MCP servers artoo's effectors may use, and artoo as an MCP server.

    artoo mcp add NAME -- COMMAND [ARGS...]     a stdio server (runs in the tool sandbox)
    artoo mcp add NAME --url URL [--header K=V] a streamable-HTTP server
    artoo mcp ls                                the servers of $ARTOO_HOME/mcp.json
    artoo mcp rm NAME
    artoo mcp tools [NAME] [--json]             ask the servers now: tools, annotations, policy
    artoo mcp policy NAME [TOOL] allow|ask|deny|default
    artoo mcp serve [--http [--port N] [--token T]] [--workspace DIR]
"""
from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from protocol.settings import load_settings

from services.runtime import mcpconfig
from services.runtime.mcpconfig import McpConfigError, ServerSpec
from services.safety import mcp as gate
from services.safety.mcpclient import McpHub

console = Console()


def _fail(message: str, code: int = 2) -> None:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    sys.exit(code)


def _load(settings) -> dict[str, ServerSpec]:
    try:
        return mcpconfig.load(settings.home)
    except McpConfigError as exc:
        _fail(str(exc))


def _pairs(items: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"{what} must be KEY=VALUE, not {item!r}")
        out[key] = value
    return out


@click.group()
def mcp() -> None:
    """MCP servers as artoo's tools ($ARTOO_HOME/mcp.json), and artoo as an MCP server."""


@mcp.command("add", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--url", default="", help="a streamable-HTTP server's URL (instead of a command)")
@click.option("--env", "envs", multiple=True, metavar="K=V", help="environment of a stdio server")
@click.option("--header", "headers", multiple=True, metavar="K=V", help="HTTP header")
@click.option("--network", is_flag=True, help="the stdio server's sandbox may use the network")
@click.option("--root", "roots", multiple=True, metavar="PATH",
              help="another path the stdio server may read (its install is found by itself)")
@click.option("--policy", type=click.Choice(mcpconfig.POLICIES), default=None,
              help="for every tool of the server (default: by each tool's annotations)")
@click.option("--timeout", type=float, default=None, help="seconds per call")
@click.option("--force", is_flag=True, help="replace a server of that name")
def add_cmd(name, command, url, envs, headers, network, roots, policy, timeout, force) -> None:
    """Add a server: artoo mcp add fs -- npx -y @modelcontextprotocol/server-filesystem
    '${workspace}'   (${workspace} is the run's workspace)."""
    settings = load_settings()
    servers = _load(settings)
    if name in servers and not force:
        _fail(f"a server named {name} exists (artoo mcp rm {name}, or --force)")
    command = tuple(c for c in command if c != "--")
    entry: dict = {"url": url} if url else {"command": command[0] if command else "",
                                           "args": list(command[1:])}
    if url and command:
        _fail("give either a command or --url, not both")
    if envs:
        entry["env"] = _pairs(envs, "--env")
    if headers:
        entry["headers"] = _pairs(headers, "--header")
    ours = {k: v for k, v in {"network": network or None, "roots": list(roots) or None,
                              "policy": policy, "timeout": timeout}.items() if v}
    if ours:
        entry["artoo"] = ours
    try:
        spec = mcpconfig.parse_entry(name, entry)
    except McpConfigError as exc:
        _fail(str(exc))
    servers[name] = spec
    path = mcpconfig.save(settings.home, servers)
    console.print(f"added {name} ({spec.transport}) to {path}; `artoo mcp tools {name}` asks "
                  f"it for its tools", highlight=False)


@mcp.command("ls")
@click.option("--json", "as_json", is_flag=True)
def ls_cmd(as_json: bool) -> None:
    """The configured servers."""
    settings = load_settings()
    servers = _load(settings)
    if as_json:
        click.echo(json.dumps({n: s.to_entry() for n, s in servers.items()}, indent=2))
        return
    if not servers:
        console.print(f"no MCP servers ({mcpconfig.config_path(settings.home)}); add one with "
                      f"`artoo mcp add NAME -- COMMAND ...`", highlight=False)
        return
    table = Table("server", "transport", "command / url", "network", "policy")
    for name, s in servers.items():
        where = s.url or " ".join([s.command, *s.args])
        pol = s.policy or "by annotations"
        if s.tools:
            pol += f" (+{len(s.tools)} per tool)"
        table.add_row(name + (" (disabled)" if s.disabled else ""), s.transport, escape(where),
                      "yes" if s.network else "no", pol)
    console.print(table)


@mcp.command("rm")
@click.argument("name")
def rm_cmd(name: str) -> None:
    """Remove a server."""
    settings = load_settings()
    servers = _load(settings)
    if name not in servers:
        _fail(f"no server named {name}", 1)
    del servers[name]
    mcpconfig.save(settings.home, servers)
    console.print(f"removed {name}")


@mcp.command("policy")
@click.argument("name")
@click.argument("args", nargs=-1, required=True)
def policy_cmd(name: str, args: tuple[str, ...]) -> None:
    """Set the policy of a server (NAME POLICY) or of one tool (NAME TOOL POLICY): allow, ask,
    deny, or default (by the tool's annotations)."""
    settings = load_settings()
    servers = _load(settings)
    if name not in servers:
        _fail(f"no server named {name}", 1)
    if len(args) not in (1, 2):
        _fail("usage: artoo mcp policy NAME [TOOL] allow|ask|deny|default")
    value = args[-1]
    if value not in (*mcpconfig.POLICIES, "default"):
        _fail(f"policy must be allow, ask, deny or default, not {value!r}")
    spec = servers[name]
    if len(args) == 2:
        if value == "default":
            spec.tools.pop(args[0], None)
        else:
            spec.tools[args[0]] = value
    else:
        spec.policy = "" if value == "default" else value
    mcpconfig.save(settings.home, servers)
    console.print(f"{name}{'.' + args[0] if len(args) == 2 else ''}: {value}")


@mcp.command("tools")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.option("--workspace", "-w", default=None, help="the workspace the servers see")
def tools_cmd(name: str | None, as_json: bool, workspace: str | None) -> None:
    """Ask the servers (now, in their sandbox) for their tools: name, annotations, and what
    the Law 1 gate does with a call (run / ask / deny). Refreshes the effectors' cache."""
    settings = load_settings()
    servers = _load(settings)
    if name:
        if name not in servers:
            _fail(f"no server named {name}", 1)
        servers = {name: servers[name]}
    ws = os.path.realpath(workspace or os.environ.get("ARTOO_WORKSPACE") or
                          str(settings.workspace))
    os.makedirs(ws, exist_ok=True)
    hub = McpHub(settings, servers, workspace=ws)
    try:
        tools = hub.discover(refresh=True)
    finally:
        hub.close()
    rows = []
    for tool in tools.values():
        verdict = gate.classify(tool, hub.specs[tool.server])
        rows.append({"tool": tool.full_name, "gate": verdict.action, "level": verdict.level,
                     "why": verdict.reason, "annotations": tool.annotations,
                     "description": tool.description, "arguments": gate.arg_skeleton(tool)})
    if as_json:
        click.echo(json.dumps({"tools": rows, "problems": hub.problems}, indent=2))
    else:
        table = Table("tool", "gate", "arguments", "why")
        for r in rows:
            table.add_row(r["tool"], r["gate"], escape(r["arguments"]), escape(r["why"]))
        console.print(table)
        for server, problem in hub.problems.items():
            console.print(f"[red]{escape(server)}[/red]: {escape(problem)}", highlight=False)
    if hub.problems:
        sys.exit(1)


@mcp.command("serve")
@click.option("--http", "http", is_flag=True, help="streamable HTTP on 127.0.0.1 (default: stdio)")
@click.option("--port", type=int, default=8765, show_default=True, help="with --http (0 = any)")
@click.option("--token", default="", help="with --http: the bearer token (default: "
              "ARTOO_MCP_TOKEN, else one kept in $ARTOO_HOME/mcp-token)")
@click.option("--workspace", "-w", default=None, help="the default workspace of run_goal")
def serve_cmd(http: bool, port: int, token: str, workspace: str | None) -> None:
    """Serve artoo over MCP: run_goal, task_status, list_tasks, cancel_task."""
    from . import mcpserve
    settings = load_settings()
    server, bridge = mcpserve.build_server(settings, workspace=workspace or "", port=port)
    try:
        if http:
            secret = mcpserve.token_for(settings, token)
            where = "--token" if token else ("ARTOO_MCP_TOKEN" if os.environ.get(
                "ARTOO_MCP_TOKEN") else f"{settings.home}/{mcpserve.TOKEN_FILE}")
            mcpserve.serve_http(server, secret, port, lambda url: mcpserve.log(
                f"artoo MCP server listening on {url} (bearer token: {where})"))
        else:
            mcpserve.serve_stdio(server)
    except KeyboardInterrupt:
        pass
    finally:
        bridge.close()


def register(main: click.Group) -> None:
    main.add_command(mcp)
