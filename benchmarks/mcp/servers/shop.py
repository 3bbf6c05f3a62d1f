"""The MCP benchmark's server (FastMCP, stdio): a shop catalogue, stock levels, an issue tracker
and exchange rates. Its data lives only here, so a goal about it needs an MCP tool: nothing in
the workspace, and no network, can answer it."""
from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

PRICES = {"widget": 42, "gadget": 17, "gizmo": 99, "doohickey": 7, "sprocket": 13}
STOCK = {"widget": 17, "gadget": 0, "gizmo": 5, "doohickey": 230, "sprocket": 64}
ISSUES = {
    1041: ("Login page times out", "closed", "Marco Bianchi"),
    1042: ("Export to CSV drops the header", "open", "Priya Raman"),
    1043: ("Dark mode colours are wrong", "open", "Marco Bianchi"),
    1044: ("Crash on an empty upload", "open", "Priya Raman"),
    1045: ("Typo in the footer", "closed", "Ana Souza"),
    1046: ("Slow search on large projects", "closed", "Priya Raman"),
}
RATES = {("EUR", "USD"): 1.08, ("EUR", "GBP"): 0.85, ("USD", "JPY"): 151.2, ("GBP", "EUR"): 1.18}
READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

mcp = FastMCP("shop", log_level="WARNING")


def _item(name: str):
    return name.strip().lower().rstrip("s") if name.strip().lower() not in PRICES \
        else name.strip().lower()


@mcp.tool(annotations=READ)
def catalogue_price(item: str) -> str:
    """The unit price in euros of an item of the shop catalogue."""
    key = _item(item)
    if key not in PRICES:
        return f"no item named {item!r} in the catalogue"
    return f"{key}: {PRICES[key]} EUR per unit"


@mcp.tool(annotations=READ)
def stock_level(item: str) -> str:
    """How many units of a shop item are in stock."""
    key = _item(item)
    if key not in STOCK:
        return f"no item named {item!r} in the catalogue"
    return f"{key}: {STOCK[key]} units in stock"


@mcp.tool(annotations=READ)
def get_issue(issue_id: int) -> str:
    """One issue of the issue tracker by its number: title, status and assignee."""
    found = ISSUES.get(int(issue_id))
    if found is None:
        return f"no issue {issue_id}"
    title, status, who = found
    return f"issue {issue_id}: {title} | status: {status} | assignee: {who}"


@mcp.tool(annotations=READ)
def list_issues(status: str = "", assignee: str = "") -> str:
    """Issues of the issue tracker, optionally only those with a status (open/closed) and/or an
    assignee; one line per issue."""
    rows = [f"{n} | {s} | {w} | {t}" for n, (t, s, w) in sorted(ISSUES.items())
            if (not status or s == status.strip().lower())
            and (not assignee or assignee.strip().lower() in w.lower())]
    return "\n".join(rows) or "no matching issues"


@mcp.tool(annotations=READ)
def exchange_rate(base: str, quote: str) -> str:
    """Today's exchange rate: how many units of `quote` one unit of `base` buys (e.g. EUR, USD)."""
    pair = (base.strip().upper(), quote.strip().upper())
    if pair not in RATES:
        return f"no rate for {pair[0]}/{pair[1]}"
    return f"1 {pair[0]} = {RATES[pair]} {pair[1]}"


if __name__ == "__main__":
    mcp.run("stdio")
