"""MCP tools under Law 1: what a tool call may do, which tools the executor is shown, and how a
result becomes a tool output. Pure (no MCP session, no bus): the session is mcpclient.py.

**The gate.** A tool's annotations (readOnlyHint, destructiveHint, idempotentHint, openWorldHint)
are the server's own claims, so they only set the default; the operator's policy in mcp.json
(allow / ask / deny per server and per tool) decides over them:

* `deny` → refused with a `[LAW1]` result, nobody is asked;
* `allow` → runs;
* `ask` → the operator approves this one call (ApprovalRequest, as a shell command's delete);
* no policy → a tool annotated read-only runs; one annotated additive (destructiveHint false)
  runs when its server is a sandboxed stdio server (it can only touch the workspace); every
  other one — destructive, or not annotated at all — asks.

**What the executor sees.** At most `mcp_max_tools` tools (fewer on the bundled model), the ones
whose names and descriptions share the most words with the goal, each one compact line with its
argument names and types, the whole within `mcp_prompt_chars`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from services.runtime.mcpconfig import ServerSpec

from .levels import DESTRUCTIVE, READ_ONLY, UNKNOWN, WORKSPACE_WRITE

SEP = "."                     # tools are offered as SERVER.TOOL


@dataclass
class McpTool:
    server: str
    name: str
    description: str = ""
    input_schema: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.server}{SEP}{self.name}"

    def hint(self, key: str) -> Optional[bool]:
        value = self.annotations.get(key)
        return value if isinstance(value, bool) else None

    @property
    def read_only(self) -> bool:
        return self.hint("readOnlyHint") is True

    @property
    def rerun_safe(self) -> bool:
        """A call of it that may have half-run can be made again (journal after a crash)."""
        return self.read_only or self.hint("idempotentHint") is True

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description,
                "inputSchema": self.input_schema, "annotations": self.annotations}

    @classmethod
    def from_dict(cls, server: str, raw: dict) -> "McpTool":
        ann = raw.get("annotations") or {}
        return cls(server=server, name=str(raw.get("name", "")),
                   description=str(raw.get("description") or ""),
                   input_schema=raw.get("inputSchema") or raw.get("input_schema") or {},
                   annotations={k: v for k, v in ann.items() if v is not None}
                   if isinstance(ann, dict) else {})


@dataclass
class Verdict:
    action: str            # "run", "ask" or "deny"
    level: str             # read-only / workspace-write / destructive / unknown (levels.py)
    reason: str


def classify(tool: McpTool, spec: ServerSpec) -> Verdict:
    """Law 1 for one MCP tool (module docstring)."""
    confined = spec.transport == "stdio"
    if tool.read_only:
        level, why = READ_ONLY, "annotated read-only (readOnlyHint)"
    elif tool.hint("destructiveHint") is False:
        level = WORKSPACE_WRITE if confined else UNKNOWN
        why = "annotated additive (destructiveHint: false)" + (
            "" if confined else " on a server outside the sandbox")
    elif tool.hint("destructiveHint") is True:
        level, why = DESTRUCTIVE, "annotated destructive (destructiveHint)"
    else:
        level, why = UNKNOWN, "its annotations do not say it only reads"
    if tool.hint("openWorldHint") and confined and not spec.network:
        why += "; it reaches outside (openWorldHint) but its sandbox has no network"
    policy = spec.policy_for(tool.name)
    if policy == "deny":
        return Verdict("deny", level, f"the operator's policy denies {tool.full_name}")
    if policy == "allow":
        return Verdict("run", level, f"{why}; allowed by the operator's policy")
    if policy == "ask":
        return Verdict("ask", level, f"{why}; the operator's policy asks")
    if level == READ_ONLY or (level == WORKSPACE_WRITE and confined):
        return Verdict("run", level, why)
    return Verdict("ask", level, why)


def denied_text(tool: McpTool, verdict: Verdict) -> str:
    return (f"[LAW1] refused: {verdict.reason} (mcp.json). The call was not made; do not try to "
            f"achieve it another way. Report that the operator's policy forbids it.")


# -- relevance: which tools the executor is shown ---------------------------------------------

_WORD = re.compile(r"[a-z][a-z0-9]+")
_STOP = frozenset("""the and for with from that this into then than what which when where who
how are was were will you your use using all any each file files its his her one two there
their them they have has had not can may get set out our about like just only also over
""".split())


def words(text: str) -> set[str]:
    """Lower-case words of a text, with identifiers split (read_text_file → read, text, file)
    and a plural's singular; stop words out."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text or "").lower().replace("_", " ")
    out = set()
    for w in _WORD.findall(spaced):
        if len(w) < 3 or w in _STOP:
            continue
        out.add(w)
        if w.endswith("s") and len(w) > 3:
            out.add(w[:-1])
    return out


def score(tool: McpTool, goal_words: set[str]) -> float:
    name = words(tool.name) | words(tool.server)
    desc = words(tool.description)
    return 3.0 * len(name & goal_words) + len(desc & goal_words)


def select(tools: Iterable[McpTool], goal: str, limit: int) -> list[McpTool]:
    """The `limit` tools that fit the goal best (all of them when there are no more); ties keep
    the servers' own order."""
    tools = list(tools)
    if len(tools) <= limit:
        return tools
    gw = words(goal)
    ranked = sorted(enumerate(tools), key=lambda it: (-score(it[1], gw), it[0]))
    return [t for _, t in ranked[:max(0, limit)]]


def _type(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "value"
    t = schema.get("type")
    if isinstance(t, list):
        t = "|".join(str(x) for x in t if x != "null")
    if schema.get("enum"):
        return "|".join(json.dumps(v) for v in schema["enum"][:5])
    if t == "array":
        return f"{_type(schema.get('items'))}[]"
    return str(t or "value")


def arg_skeleton(tool: McpTool, local: bool = False) -> str:
    """`{"path":"<string>","head"?:<number>}`: the argument names, types, optional ones marked."""
    props = tool.input_schema.get("properties") or {}
    required = set(tool.input_schema.get("required") or [])
    parts = []
    for name in sorted(props, key=lambda n: (n not in required, list(props).index(n)))[:8]:
        t = _type(props[name])
        value = f'"<{t}>"' if t == "string" else f"<{t}>"
        parts.append(f'"{name}"{"" if name in required else "?"}:{value}')
    return "{" + ",".join(parts) + "}"


def _clip(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n - 1] + "…"


def usage_lines(tools: list[McpTool], *, local: bool, budget: int) -> list[str]:
    """One line per offered tool, within `budget` characters in all."""
    lines, used = [], 0
    for tool in tools:
        mark = " [read-only]" if tool.read_only else (
            " [asks the operator]" if tool.hint("destructiveHint") is not False else "")
        desc = _clip(tool.description, 110 if local else 160)
        if local:
            line = f"TOOL: {tool.full_name} {arg_skeleton(tool, True)}  — {desc}{mark}"
        else:
            line = (f'{{"action":"tool","tool":"{tool.full_name}","arguments":'
                    f'{arg_skeleton(tool)}}}  — {desc}{mark}')
        if used + len(line) > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return lines


def check_arguments(tool: McpTool, args: dict) -> str:
    """'' when the call names every required argument and only known ones (when the schema
    closes them), else what is wrong: said to the model before any server is asked."""
    props = tool.input_schema.get("properties") or {}
    missing = [r for r in tool.input_schema.get("required") or [] if r not in args]
    if missing:
        return (f"{tool.full_name}: missing argument(s) {', '.join(missing)}; arguments: "
                f"{arg_skeleton(tool)}")
    if props and tool.input_schema.get("additionalProperties") is False:
        extra = [a for a in args if a not in props]
        if extra:
            return f"{tool.full_name}: unknown argument(s) {', '.join(extra)}; arguments: " \
                   f"{arg_skeleton(tool)}"
    return ""


def planner_note(home, goal: str, limit: int = 6) -> str:
    """One line for the planner: the MCP tools the executors have that fit this goal (from the
    discovery cache of the configured servers; '' when there are none)."""
    from services.runtime import mcpconfig
    try:
        specs = mcpconfig.load(home)
    except mcpconfig.McpConfigError:
        return ""
    cache = mcpconfig.read_cache(home)
    tools = []
    for name, spec in specs.items():
        hit = cache.get(name) or {}
        if spec.disabled or hit.get("fingerprint") != spec.fingerprint():
            continue
        tools += [McpTool.from_dict(name, t) for t in hit.get("tools") or []]
    picked = select(tools, goal, limit)
    if not picked:
        return ""
    return ("The executors also have these MCP tools (use them for what they offer; name them in "
            "a subtask's tools): " + "; ".join(f"{t.full_name} ({_clip(t.description, 80)})"
                                              for t in picked))


def backed_by_mcp(answer: str, records: Iterable[Any], goal: str) -> str:
    """Why an answer rests on an MCP result ('' when it does not): this attempt read data from
    an MCP tool, and every value of the answer is in its successful tool outputs (the MCP
    results, or a program that computed from them). The data is then the server's, which no
    check in the workspace can re-derive: Law 0 takes the result as tool output (the record and
    its digest), and the outcome stays "unverified" rather than failing on a check that cannot
    see the data. A value from nowhere is left to the usual checks."""
    from . import evidence as ev
    ok = [r for r in records if not r.error]
    mine = [r for r in ok if getattr(r, "server", "") and (r.output or "").strip()]
    if not mine or not ev.answer_values(answer):
        return ""
    outs = [(f"{r.target} {json.dumps(r.arguments, ensure_ascii=False)}", r.output or "")
            for r in ok]
    if ev.unsupported_values(answer, outs, goal):
        return ""
    names = ", ".join(sorted({r.tool for r in mine}))
    digests = ", ".join(sorted({r.digest[:19] for r in mine if r.digest}))
    return (f"the answer rests on the MCP tool result of {names}" +
            (f" ({digests}…)" if digests else "") + ", the server's data: the workspace holds "
            "nothing an independent check could re-derive it from")


# -- results ----------------------------------------------------------------------------------

def render_result(result: dict, limit: int) -> tuple[str, Optional[str]]:
    """(output text, error) of a CallToolResult as a dict: text blocks in order, other blocks
    named, structured content as JSON when there is no text; `isError` makes it an error."""
    parts = []
    for block in result.get("content") or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource":
            res = block.get("resource") or {}
            parts.append(str(res.get("text")) if res.get("text") is not None else
                         f"[resource {res.get('uri', '')} ({res.get('mimeType', 'binary')})]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.get('mimeType', '')}, not shown]")
        elif kind is not None:
            parts.append(f"[{kind} content]")
    structured = result.get("structuredContent")
    if structured is not None and not any(p.strip() for p in parts):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(parts)
    if len(text) > limit:
        text = text[:limit // 3] + f"\n…[{len(text) - limit} characters omitted]…\n" + \
            text[-(limit - limit // 3):]
    if result.get("isError"):
        return text, "the tool reported an error: " + (_clip(text, 300) or "(no message)")
    return text or "(no output)", None


def digest(result: Any) -> str:
    """sha256 of the whole result (canonical JSON): the record names exactly what came back."""
    raw = json.dumps(result, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()


# -- confinement of a stdio server ------------------------------------------------------------

def install_roots(command: str, args: list[str], extra: Iterable[str] = ()) -> list[str]:
    """The paths a stdio server's own install lives in, to be mounted read-only in its sandbox:
    for the program and every argument that is an existing path, its package (the enclosing
    `node_modules`, or the prefix above a `bin/`), else its directory; plus `extra` (mcp.json
    `roots`). Never `/` or a home directory as a whole."""
    home = os.path.realpath(os.path.expanduser("~"))
    found: list[str] = []
    exe = shutil.which(command) or command
    candidates = [exe, *[a for a in args if a.startswith(("/", "./", "../"))]]
    for raw in candidates:
        if not os.path.exists(raw):
            continue
        for path in dict.fromkeys([os.path.abspath(raw), os.path.realpath(raw)]):
            found.append(_package_root(path))
    for raw in extra:
        path = os.path.realpath(os.path.expanduser(raw))
        if os.path.exists(path):
            found.append(path)
    out = []
    for root in dict.fromkeys(found):
        if root in ("/", home, os.path.dirname(home)) or not root:
            continue
        out.append(root)
    return out


def _package_root(path: str) -> str:
    parts = path.split(os.sep)
    if "node_modules" in parts:
        i = len(parts) - 1 - parts[::-1].index("node_modules")
        return os.sep.join(parts[:i + 1])
    parent = os.path.dirname(path) if not os.path.isdir(path) else path
    if os.path.basename(parent) == "bin":
        return os.path.dirname(parent)
    return parent
