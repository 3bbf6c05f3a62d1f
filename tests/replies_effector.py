"""Scripted-LLM reply builders for the effector: R3 executor steps and R4a verdicts.

Used by the effector tests and by the pipeline's end-to-end tests:

    llm.add("executor", shell("ls -la"))              # one tool call
    llm.add("executor", result("3 files"))            # the final result
    llm.add("agentval", all_met("lists the files"))   # every criterion met
    llm.add("agentval", unmet("lists the files", "listed the wrong dir", "list the workspace"))

Several subtasks of one task share the task id the scripted server keys on; route them by intent
with `SubtaskScript` (the executor and agentval prompts both carry a "Subtask: <intent>" line):

    script = SubtaskScript()
    script.executor("count the lines", shell("wc -l a.txt"), result("12"))
    script.agentval("count the lines", all_met("prints the count"))
    script.install(llm)
"""
from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Any, Iterable, Optional

from scripted_llm import DECLINE_CHECK


# -- R3 executor -------------------------------------------------------------------------------

def tool(name: str, **args: Any) -> dict:
    return {"action": "tool", "tool": name, **args}


def shell(command: str) -> dict:
    return tool("shell", command=command)


def read_file(path: str) -> dict:
    return tool("read_file", path=path)


def write_file(path: str, content: str) -> dict:
    return tool("write_file", path=path, content=content)


def list_dir(path: str = ".") -> dict:
    return tool("list", path=path)


def glob(pattern: str, root: str = ".") -> dict:
    return tool("glob", pattern=pattern, root=root)


def search_text(pattern: str, path: str = ".") -> dict:
    return tool("search_text", pattern=pattern, path=path)


def web_search(query: str) -> dict:
    return tool("web_search", query=query)


def result(output: Any, status: str = "completed", uncertainty: Optional[str] = None) -> dict:
    return {"action": "result", "status": status, "output": output, "uncertainty": uncertainty}


# -- R4a agent-validator -----------------------------------------------------------------------

def criterion(text: str, met: bool = True, evidence: str = "", failure_class: str = "") -> dict:
    # R4a refuses placeholder evidence and evidence that only restates the criterion or the
    # executor's claim; pass evidence= quoting a tool record when a test is about evidence.
    return {"criterion": text, "met": met,
            "evidence": evidence or ("scripted check: a tool record confirms this" if met
                                     else "scripted check: no tool record shows this"),
            "failure_class": "" if met else (failure_class or "logical")}


def verdict(criteria: Iterable[dict], verdict: Optional[str] = None, what_was_wrong: str = "",
            what_to_do: str = "") -> dict:
    criteria = list(criteria)
    if verdict is None:
        verdict = "matched" if all(c["met"] for c in criteria) else "retry"
    return {"criteria": criteria, "verdict": verdict, "what_was_wrong": what_was_wrong,
            "what_to_do": what_to_do}


def all_met(*criteria: str, evidence: str = "") -> dict:
    return verdict([criterion(c, True, evidence) for c in criteria])


def unmet(failed: str, what_was_wrong: str, what_to_do: str, *, met: Iterable[str] = (),
          failure_class: str = "logical", evidence: str = "") -> dict:
    items = [criterion(c, True) for c in met]
    items.append(criterion(failed, False, evidence or what_was_wrong, failure_class))
    return verdict(items, "retry", what_was_wrong, what_to_do)


def cannot(failed: str, why: str, failure_class: str = "environmental") -> dict:
    return verdict([criterion(failed, False, why, failure_class)], "failed", why, "")


# -- R4a's Law 0 checker (plain text) ----------------------------------------------------------

def check(command: str, output_file: str = "") -> str:
    """The independent checker's reply: the file the goal asks for (if any) and a read-only
    command that prints the expected result."""
    return f"FILE: {output_file or 'none'}\nCOMMAND: {command}"


def check_program(code: str, output_file: str = "") -> str:
    """The checker's reply in the other form: a Python program (k-of-N, the second derivation
    before "verified")."""
    return f"FILE: {output_file or 'none'}\nPYTHON:\n{code}"


def reads(command: str) -> str:
    """The second derivation of a `cat FILE` check: a program that prints the same file."""
    name = command.removeprefix("cat ").strip()
    return check_program(f"print(open({name!r}).read().strip())")


# -- routing several subtasks of one task ------------------------------------------------------

class SubtaskScript:
    """Replies per (role, subtask intent); install() registers responders on a ScriptedLLM."""

    def __init__(self):
        self._queues: dict[tuple[str, str], deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def executor(self, intent: str, *replies: Any) -> "SubtaskScript":
        return self._add("executor", intent, replies)

    def agentval(self, intent: str, *replies: Any) -> "SubtaskScript":
        return self._add("agentval", intent, replies)

    def verifier(self, intent: str, *replies: Any) -> "SubtaskScript":
        return self._add("verifier", intent, replies)

    def _add(self, role: str, intent: str, replies) -> "SubtaskScript":
        with self._lock:
            self._queues[(role, intent)].extend(replies)
        return self

    def responder(self, role: str):
        def respond(request):
            prompt = request.user
            with self._lock:
                keys = [k for k in self._queues if k[0] == role and (
                    f"Subtask: {k[1]}" in prompt or f"Goal: {k[1]}" in prompt)]
                keys.sort(key=lambda k: -len(k[1]))            # the most specific intent wins
                for key in keys:
                    if self._queues[key]:
                        return self._queues[key].popleft()
            if role == "verifier":
                return DECLINE_CHECK
            raise LookupError(f"no scripted {role} reply for this subtask")
        return respond

    def install(self, llm) -> "SubtaskScript":
        llm.on("executor", self.responder("executor"))
        llm.on("agentval", self.responder("agentval"))
        llm.on("verifier", self.responder("verifier"))
        return self
