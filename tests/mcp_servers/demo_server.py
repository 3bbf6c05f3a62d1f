"""A real MCP server for the tests and the MCP benchmark, written with the SDK's FastMCP (stdio).

Tools: `lookup_price` and `stock_level` (read-only, from a catalogue only this server knows),
`delete_file` (destructive: deletes a file in its working directory, the run's workspace),
`add_note` (no annotations at all: unknown), and the misbehaving ones `crash` (the process exits
mid-call), `hang` (never answers) and `garbage` (writes what is not JSON-RPC, then never answers).
"""
from __future__ import annotations

import os
import sys
import time

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

CATALOGUE = {"widget": (42, 17), "gadget": (17, 0), "gizmo": (99, 5), "doohickey": (7, 230),
             "sprocket": (13, 64)}
READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
DESTROY = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True)

mcp = FastMCP("demo", log_level="WARNING")


@mcp.tool(annotations=READ)
def lookup_price(item: str) -> str:
    """Look up the unit price (in euros) of a catalogue item by its name."""
    entry = CATALOGUE.get(item.strip().lower())
    if entry is None:
        return f"no item named {item!r} in the catalogue"
    return f"{item.strip().lower()}: {entry[0]} EUR"


@mcp.tool(annotations=READ)
def stock_level(item: str) -> str:
    """How many units of a catalogue item are in stock."""
    entry = CATALOGUE.get(item.strip().lower())
    if entry is None:
        return f"no item named {item!r} in the catalogue"
    return f"{item.strip().lower()}: {entry[1]} in stock"


@mcp.tool(annotations=READ)
def list_items() -> str:
    """List the names of every item in the catalogue."""
    return "\n".join(sorted(CATALOGUE))


@mcp.tool(annotations=DESTROY)
def delete_file(path: str) -> str:
    """Delete a file from the working directory."""
    os.remove(path)
    return f"deleted {path}"


@mcp.tool()
def add_note(text: str) -> str:
    """Append a line to notes.txt in the working directory."""
    with open("notes.txt", "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return "noted"


@mcp.tool(annotations=READ)
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@mcp.tool(annotations=READ)
def hang() -> str:
    """Never answer."""
    time.sleep(3600)
    return "late"


@mcp.tool(annotations=READ)
def garbage() -> str:
    """Write something that is not JSON-RPC on stdout, then never answer."""
    os.write(1, b"this is not json-rpc\n")
    time.sleep(3600)
    return "late"


@mcp.tool(annotations=READ)
def whoami() -> str:
    """Where the server runs: its working directory, HOME, and whether it sees the network."""
    import socket
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1).close()
        net = "network"
    except OSError as exc:
        net = f"no network ({exc.__class__.__name__})"
    return f"cwd={os.getcwd()} home={os.environ.get('HOME')} {net}"


if __name__ == "__main__":
    print("demo MCP server starting", file=sys.stderr)
    mcp.run("stdio")
