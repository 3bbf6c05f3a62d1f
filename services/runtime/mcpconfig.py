"""The MCP servers artoo's effectors may use: `$ARTOO_HOME/mcp.json` (`artoo mcp add/ls/rm`).

The file is in the `mcpServers` format desktop clients use (Claude Desktop, Cursor), so a server
entry can be copied between them:

    {"mcpServers": {
        "fs":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem",
                                            "${workspace}"]},
        "docs": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer …"}}}}

A stdio server has `command`, `args` and `env`; a streamable-HTTP server has `url` (and
`headers`). What only artoo reads sits under the entry's own `"artoo"` key, which other clients
ignore: `policy` (allow / ask / deny for every tool of the server; unset = by the tool's
annotations, and ask when they do not say it only reads), `tools` (the same per tool name),
`network` (the stdio server's sandbox may use the network; default no), `roots` (extra paths it
may read), `timeout` (seconds per call). `${workspace}` in args and env is the run's workspace.

Pure file handling, no MCP: the CLI writes it, the effector reads it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

POLICIES = ("allow", "ask", "deny")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
WORKSPACE_VAR = "${workspace}"


class McpConfigError(ValueError):
    """mcp.json is unreadable or an entry is invalid (the message says which and why)."""


@dataclass
class ServerSpec:
    name: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    policy: str = ""                     # "" = by the tools' annotations
    tools: dict[str, str] = field(default_factory=dict)    # tool name -> allow / ask / deny
    network: bool = False
    roots: list[str] = field(default_factory=list)
    timeout: Optional[float] = None
    disabled: bool = False

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def policy_for(self, tool: str) -> str:
        """The operator's policy for one tool: its own, else the server's, else ''."""
        return self.tools.get(tool) or self.policy or ""

    def resolved(self, workspace: str) -> "ServerSpec":
        """The entry with `${workspace}` replaced by the run's workspace."""
        sub = lambda v: v.replace(WORKSPACE_VAR, workspace)  # noqa: E731
        return ServerSpec(**{**self.__dict__, "args": [sub(a) for a in self.args],
                             "env": {k: sub(v) for k, v in self.env.items()}})

    def fingerprint(self) -> str:
        """What the discovered tool list depends on (the discovery cache's key)."""
        raw = json.dumps([self.command, self.args, self.env, self.url, self.headers,
                          self.network, self.roots], sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def to_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {}
        if self.url:
            entry["url"] = self.url
            if self.headers:
                entry["headers"] = dict(self.headers)
        else:
            entry["command"] = self.command
            entry["args"] = list(self.args)
            if self.env:
                entry["env"] = dict(self.env)
        ours: dict[str, Any] = {}
        if self.policy:
            ours["policy"] = self.policy
        if self.tools:
            ours["tools"] = dict(self.tools)
        if self.network:
            ours["network"] = True
        if self.roots:
            ours["roots"] = list(self.roots)
        if self.timeout:
            ours["timeout"] = self.timeout
        if self.disabled:
            ours["disabled"] = True
        if ours:
            entry["artoo"] = ours
        return entry


def config_path(home: str | Path) -> Path:
    return Path(home) / "mcp.json"


def _policy(value: Any, where: str) -> str:
    if value in (None, ""):
        return ""
    if value not in POLICIES:
        raise McpConfigError(f"{where}: policy must be one of {', '.join(POLICIES)}, not "
                             f"{value!r}")
    return str(value)


def parse_entry(name: str, entry: Any) -> ServerSpec:
    if not _NAME.match(name or ""):
        raise McpConfigError(f"server name {name!r}: use letters, digits, '-' or '_' (at most "
                             f"40, no dots: tools are offered as NAME.TOOL)")
    if not isinstance(entry, dict):
        raise McpConfigError(f"server {name}: the entry must be an object")
    ours = entry.get("artoo") or {}
    if not isinstance(ours, dict):
        raise McpConfigError(f"server {name}: \"artoo\" must be an object")
    url, command = entry.get("url") or "", entry.get("command") or ""
    if bool(url) == bool(command):
        raise McpConfigError(f"server {name}: give either \"command\" (stdio) or \"url\" "
                             f"(streamable HTTP)")
    args, env = entry.get("args") or [], entry.get("env") or {}
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"server {name}: \"args\" must be a list of strings")
    if not isinstance(env, dict):
        raise McpConfigError(f"server {name}: \"env\" must be an object")
    tools = ours.get("tools") or {}
    if not isinstance(tools, dict):
        raise McpConfigError(f"server {name}: \"artoo.tools\" must map tool names to policies")
    timeout = ours.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise McpConfigError(f"server {name}: \"artoo.timeout\" must be a positive number")
    return ServerSpec(
        name=name, command=str(command), args=list(args),
        env={str(k): str(v) for k, v in env.items()}, url=str(url),
        headers={str(k): str(v) for k, v in (entry.get("headers") or {}).items()},
        policy=_policy(ours.get("policy"), f"server {name}"),
        tools={str(t): _policy(p, f"server {name}, tool {t}") for t, p in tools.items()},
        network=bool(ours.get("network", False)), roots=[str(r) for r in ours.get("roots") or []],
        timeout=float(timeout) if timeout else None, disabled=bool(ours.get("disabled", False)))


def load(home: str | Path) -> dict[str, ServerSpec]:
    """Every server of mcp.json (none when there is no file); McpConfigError when it is bad."""
    path = config_path(home)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise McpConfigError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise McpConfigError(f"{path} is not valid JSON: {exc}") from None
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f"{path}: expected {{\"mcpServers\": {{...}}}}")
    return {name: parse_entry(name, entry) for name, entry in servers.items()}


def save(home: str | Path, servers: dict[str, ServerSpec]) -> Path:
    """Write mcp.json atomically (mode 0600: entries may carry tokens), keeping any other
    top-level keys the file had."""
    path = config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data["mcpServers"] = {name: spec.to_entry() for name, spec in servers.items()}
    fd, tmp = tempfile.mkstemp(prefix=".mcp-", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


# -- the discovery cache: what each server offered the last time it was asked -----------------

def cache_path(home: str | Path) -> Path:
    return Path(home) / "state" / "mcp" / "tools.json"


def read_cache(home: str | Path) -> dict[str, dict]:
    try:
        data = json.loads(cache_path(home).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_cache(home: str | Path, server: str, fingerprint: str, tools: list[dict]) -> None:
    """Remember one server's tools (atomically; racing effectors each write a whole file)."""
    path = cache_path(home)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = read_cache(home)
        data[server] = {"fingerprint": fingerprint, "tools": tools}
        fd, tmp = tempfile.mkstemp(prefix=".tools-", dir=str(path.parent))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass                      # a cache: the next effector asks the server again
