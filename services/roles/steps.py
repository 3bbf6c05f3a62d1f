"""The executor model's replies as steps (`ExecutorStep`): the JSON form remote models give, with
the shapes small models produce tolerated, and the local model's plain-text form (`PYTHON:`,
`COMMAND:`, `ANSWER:`, `NOT POSSIBLE:`, `TOOL:`), parsed in code. Kept apart from executor.py,
which runs the steps."""
from __future__ import annotations

import json
import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, model_validator

from services.roles.programs import mended_command, python_code, python_command
from services.safety import mcp
from services.safety.tools import TOOL_SPECS

_ARG_FIELDS = ("command", "path", "content", "pattern", "root", "glob", "query")
_ARG_CONTAINERS = ("args", "arguments", "parameters", "input", "params")
_STEP_KEYS = frozenset(("action", "tool", "status", "output", "uncertainty", "answer_first",
                        "mcp_args", *_ARG_CONTAINERS))


class ExecutorStep(BaseModel):
    """One reply of the executor LLM: a tool call or the final result."""
    model_config = ConfigDict(extra="ignore")
    action: Literal["tool", "result"]
    tool: str = ""
    command: Optional[str] = None
    path: Optional[str] = None
    content: Optional[str] = None
    pattern: Optional[str] = None
    root: Optional[str] = None
    glob: Optional[str] = None
    query: Optional[str] = None
    status: Literal["completed", "uncertain", "failed", "not_possible"] = "completed"
    output: Any = None
    uncertainty: Optional[str] = None
    answer_first: bool = False     # local form "ANSWER: y / PYTHON: x": the answer came first
    mcp_args: Optional[dict] = None   # an MCP tool's arguments (its own names, any shape)

    @model_validator(mode="before")
    @classmethod
    def _tolerate(cls, value: Any) -> Any:
        """Accept the shapes small models produce: nested args, a tool name as the action, a
        missing action, content given as JSON, odd status spellings."""
        if not isinstance(value, dict):
            return value
        value = dict(value)
        raw_action = str(value.get("action") or "").strip()
        if mcp.SEP in raw_action and " " not in raw_action:   # {"action": "srv.tool", ...}
            value.setdefault("tool", raw_action)
            value["action"] = "tool"
        tool = str(value.get("tool") or "").strip()
        if tool and tool not in TOOL_SPECS and value.get("mcp_args") is None:
            # an MCP tool: its arguments are its own, nested or at the top level
            nested = next((value[k] for k in _ARG_CONTAINERS if isinstance(value.get(k), dict)),
                          None)
            value["mcp_args"] = dict(nested) if nested is not None else {
                k: v for k, v in value.items() if k not in _STEP_KEYS}
        for key in _ARG_CONTAINERS:
            nested = value.get(key)
            if isinstance(nested, dict):
                for k, v in nested.items():
                    value.setdefault(k, v)
        action = str(value.get("action") or "").strip().lower()
        if action in TOOL_SPECS:
            value.setdefault("tool", action)
            action = "tool"
        if action not in ("tool", "result"):
            action = "tool" if value.get("tool") else "result"
        value["action"] = action
        content = value.get("content")
        if isinstance(content, (dict, list)):
            value["content"] = json.dumps(content, ensure_ascii=False, indent=2)
        elif content is not None and not isinstance(content, str):
            value["content"] = str(content)
        for key in ("command", "path", "pattern", "root", "glob", "query"):
            if value.get(key) is not None and not isinstance(value[key], str):
                value[key] = str(value[key])
        status = str(value.get("status") or "completed").strip().lower()
        value["status"] = {"complete": "completed", "done": "completed", "success": "completed",
                           "ok": "completed", "error": "failed", "failure": "failed",
                           "unsure": "uncertain", "partial": "uncertain",
                           "impossible": "not_possible", "not possible": "not_possible",
                           "not_found": "not_possible", "not found": "not_possible",
                           "does_not_exist": "not_possible"}.get(status, status)
        if value["status"] not in ("completed", "uncertain", "failed", "not_possible"):
            value["status"] = "uncertain"
        return value

    def tool_args(self) -> dict[str, Any]:
        if self.mcp_args is not None and self.tool not in TOOL_SPECS:
            return dict(self.mcp_args)
        spec = TOOL_SPECS.get(self.tool)
        names = spec.args if spec else _ARG_FIELDS
        return {n: getattr(self, n) for n in names if getattr(self, n, None) is not None}


_LOCAL_REPLY = re.compile(r"^\s*(?:\*\*)?(COMMAND|PYTHON|ANSWER|NOT[ _]POSSIBLE|FAILED|TOOL)"
                          r"(?:\*\*)?\s*:\s*", re.I | re.M)


def parse_tool_line(rest: str) -> "ExecutorStep":
    """`TOOL: srv.tool {"arg": 1}` (the local form of an MCP call); a non-JSON rest is kept as
    `__text__` for the executor to give to the tool's one required argument."""
    line = rest.strip().splitlines()[0] if rest.strip() else ""
    name, _, tail = line.strip().strip("`").partition(" ")
    if not name:
        raise ValueError("TOOL: names no tool")
    tail = tail.strip()
    args: dict = {}
    if tail:
        try:
            parsed = json.loads(tail[tail.index("{"):tail.rindex("}") + 1]) if "{" in tail \
                else None
        except ValueError:
            parsed = None
        args = parsed if isinstance(parsed, dict) else {"__text__": tail.strip("'\"")}
    return ExecutorStep(action="tool", tool=name.strip(), mcp_args=args)
_FENCE = re.compile(r"^```[a-z]*\s*\n?|\n?```\s*$", re.I)


def parse_local_step(text: str) -> ExecutorStep:
    """The local executor's plain-text reply as a step; ValueError when it has no known form."""
    match = _LOCAL_REPLY.search(text or "")
    if not match:
        fenced = re.search(r"```(bash|sh|python3?|py)?\s*\n(.+?)```", text or "", re.S)
        if fenced:
            code = fenced.group(2).strip()
            command = python_command(code) if (fenced.group(1) or "").startswith("py") else code
            return ExecutorStep(action="tool", tool="shell", command=command)
        raise ValueError("the reply has no PYTHON:, COMMAND:, ANSWER: or NOT POSSIBLE: line")
    kind = match.group(1).upper().replace("_", " ")
    rest = (text or "")[match.end():]
    if kind == "TOOL":
        return parse_tool_line(rest)
    if kind == "ANSWER":
        nxt = next((m for m in _LOCAL_REPLY.finditer(rest)
                    if m.group(1).upper() in ("COMMAND", "PYTHON")), None)
        if nxt:
            # "ANSWER: y / PYTHON: x": a guess, then the way to get it; the attempt decides
            # (an answer before any output is unbacked: run x)
            step = parse_local_step(rest[nxt.start():])
            answer = parse_local_step(text[match.start():match.end()] + rest[:nxt.start()])
            step.status, step.output, step.answer_first = answer.status, answer.output, True
            return step
    after = None
    if kind in ("COMMAND", "PYTHON"):
        nxt = _LOCAL_REPLY.search(rest)
        after = parse_local_step(rest[nxt.start():]) if nxt else None
        rest = rest[:nxt.start()] if nxt else rest
    if kind == "PYTHON":
        body = python_code(rest)
        if not body.strip():
            raise ValueError("PYTHON: has no program")
        body = python_command(body)
    else:
        body = _FENCE.sub("", rest.strip()).strip()
        if kind == "COMMAND":
            body = mended_command(body.strip("`").strip())
        else:                   # an answer is one line; what follows is commentary
            body = body.splitlines()[0].strip() if body else ""
    if kind in ("COMMAND", "PYTHON"):
        if not body:
            raise ValueError("COMMAND: is empty")
        step = ExecutorStep(action="tool", tool="shell", command=body)
        if after is not None and after.action == "result":
            # "COMMAND: x / ANSWER: y": kept only for when x turns out to be a repeat (below)
            step.status, step.output = after.status, after.output
        return step
    status = {"ANSWER": "completed", "NOT POSSIBLE": "not_possible", "FAILED": "failed"}[kind]
    return ExecutorStep(action="result", status=status, output=body)
