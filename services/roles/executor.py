"""R3 Executor (seeds/000 §5, §6; Go digest §2.4): carries out one subtask with tools.

One attempt = at most `executor_max_turns` LLM turns, one tool call per turn. Each turn the LLM sees
the subtask (and the user's own words when it is the whole goal), an overview of the workspace's
files taken at the start, today's date only when the goal speaks of time (a model copies a date
it sees into commands and answers), any correction from R4a, and the calls made so far with
their results (each cut to `tool_output_chars` characters, head third + tail two thirds, with a
marker). The duplicate-call guard works on the structured call itself: the same call twice in a
row is not executed (the model is told so), a third time ends the attempt. Every tool result is a
ToolCallRecord, so R4a judges tool output, not the model's claims. LLM and parse errors end the
attempt as `failed` with the error text, never silently. The model's replies become steps in
steps.py (the JSON form, and the local model's `PYTHON:` / `COMMAND:` / `ANSWER:` text).
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Optional

from protocol.messages import CorrectionSignal, ExecutionResult, SubTask, ToolCallRecord
from protocol.settings import Settings

from services.roles.calibration import without_blocks
from services.roles.law0report import SILENT_WRITE
from services.roles.programs import PYTHON_PREFIX, names_data_file
from services.runtime import tasklog, telemetry, world
from services.runtime.journal import ToolJournal
from services.runtime.llm import RESAMPLE_TEMPERATURE, BudgetSpent, LLMError
from services.safety import evidence, mcp, overview, referents
from services.safety.record import printed_only_errors
from services.safety.tools import TOOL_SPECS, Toolbox, approval_note, head_tail, one_line

from .steps import ExecutorStep, parse_local_step

log = logging.getLogger("artoo.executor")

MAX_OUTPUT_CHARS = 65_536      # a result must stay far below the bus's max frame size


def bound_output(value: Any) -> Any:
    """Keep a result's output bounded (head + tail) so its message always fits on the bus."""
    if isinstance(value, str):
        return head_tail(value, MAX_OUTPUT_CHARS)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return head_tail(str(value), MAX_OUTPUT_CHARS)
    return value if len(text) <= MAX_OUTPUT_CHARS else head_tail(text, MAX_OUTPUT_CHARS)


def signature(tool: str, args: dict[str, Any]) -> str:
    """Identity of a call for the duplicate guard: tool + canonical (whitespace-trimmed) args."""
    norm = {k: (" ".join(v.split()) if isinstance(v, str) and k != "content" else v)
            for k, v in args.items()}
    return tool + ":" + json.dumps(norm, sort_keys=True, ensure_ascii=False)


def describe_call(record: ToolCallRecord, limit: int = 160) -> str:
    """One line per call: `shell ls -la → ok` / `→ ERROR: …` (used in correction prompts). A call
    that exited 0 but printed only error messages is not shown as "ok": the retry would build on
    work that never happened (dev rename-txt-to-md)."""
    target = one_line(record.target or json.dumps(record.arguments, ensure_ascii=False), limit)
    if record.error:
        return f"{record.tool} {target} → ERROR: {' '.join(record.error.split())[:120]}"
    printed = printed_only_errors(record.output)
    if printed:
        return f"{record.tool} {target} → did nothing, it printed only errors: {printed[:120]}"
    return f"{record.tool} {target} → ok"


_SYSTEM = """You are the Executor of artoo. You carry out ONE subtask on this machine using tools: one tool call per reply, then the result.
Reply with exactly one JSON object, no prose. Tools:
{tools}
Final answer: {{"action":"result","status":"completed","output":<the answer or data>,"uncertainty":null}}
If what the task asks about does not exist: {{"action":"result","status":"not_possible","output":"<what does not exist>"}}
Rules:
- Never invent tool output; the answer must come from tool results shown to you.
- Give the result as soon as the success criteria are met. status: completed = criteria met; failed = a tool error you cannot work around; uncertain = genuinely unclear.
- To delete or overwrite files, just make the call: the operator is asked to approve it. A result starting with [LAW1] means it was refused: do not try another way around it; report it.
- Do not repeat a call that already ran; its result is below.
Workspace (your working directory; create files here): {workspace}"""


# The bundled 1.5B model (LLMClient.local): plain text, not JSON — shell commands are full of
# quotes, and under a JSON grammar the small model ended the string at the first unescaped `"`
# (`awk -F, 'NR>1 && $2==` ran as the command). Shorter and concrete. In both prompts the
# workspace comes last: the llama.cpp prompt cache then serves everything before it for any
# workspace (a miss costs ~10 s per task on 2 cores).
_LOCAL_SYSTEM = """You are the Executor of artoo. Do ONE task on this machine, one step per reply.
Reply in exactly one of these forms:
PYTHON:
<a short python3 program that does the task and prints the result>
COMMAND: <one bash command>
ANSWER: <only the value(s) the task asks for, copied from an output above>
NOT POSSIBLE: <what does not exist: no such file, name, key or column>
Rules:
- Use the real file names, columns and formats shown in the workspace files below.
- To read data inside files (CSV, JSON, log lines, key=value settings), write PYTHON: open the file, split each record into its fields (csv.DictReader, json.load, line.split()), select by the exact field the task names, and print the final value (or write the output file).
- For files and folders (find, count, copy, rename), one COMMAND: that does every step, e.g.
  COMMAND: find src -type f -name '*.txt' | wc -l
- Never count or add up in your head: the program prints the final value.
- Match names, keys and words exactly, never a similar one.
- To delete or overwrite a file, just do it: the operator approves it.
- If a step was refused ([LAW1]), report that; do not try another way around it.
- ANSWER only when an output above shows the task is done.
Workspace (the current directory): {workspace}"""


def spelt_out(correction: Optional[CorrectionSignal], form: str = "COMMAND: ") -> bool:
    """The correction gives the exact command that fixes the attempt (`COMMAND: printf …`,
    services/safety/record.py): the executor is asked for a command, which it can copy; one
    that says to write a `PYTHON:` program gets a program (asked for a command instead, the
    model wrote `touch lists/books.md`)."""
    return correction is not None and form in (correction.what_to_do or "")


_LOCAL_MCP = """To call one of these tools, reply
TOOL: <name> {"<argument>": <value>}
%s
- When one of these tools gives what the task asks for, call it with TOOL: instead of a command.
"""




def _flattened_program(record: ToolCallRecord) -> bool:
    """A `python3 -c '…'` command whose program lost its line breaks (`import csv with open(…)
    as f: …`), a SyntaxError the 1.5B model repeated round after round in the benchmark logs
    instead of switching to its multi-line PYTHON: form."""
    program = evidence.python_program(record.target if record.tool == "shell" else "")
    return bool(program) and "\n" not in program.strip() and \
        "SyntaxError" in f"{record.output}\n{record.error}"


LOCAL_OUTPUT_CHARS = 1000
LOCAL_MAX_TOKENS = 320       # a PYTHON: program is longer than a one-line command
LOCAL_TOOLS = ("shell",)


class Executor:
    """R3 for one subtask (all its attempts)."""

    def __init__(self, subtask: SubTask, llm, toolbox: Toolbox, settings: Settings,
                 journal: Optional[ToolJournal] = None):
        self.subtask, self.journal, self.llm, self.toolbox = subtask, journal, llm, toolbox
        self.settings = settings
        self.local = local = bool(getattr(llm, "local", False))
        # The bundled 1.5B model reads ~60 tokens/s: keep its prompts small.
        self.output_chars = min(settings.tool_output_chars, LOCAL_OUTPUT_CHARS) if local \
            else settings.tool_output_chars
        self.transcript_chars = 2 * self.output_chars
        self.max_turns = settings.executor_max_turns
        self.history: list[ToolCallRecord] = []        # every call of every attempt
        self.task_id = subtask.parent_task_id
        self._overview: Optional[str] = None
        # calls of rejected attempts and rounds: at temperature 0 the model, shown nearly the same
        # prompt, proposes the same first command again; running it again only repeats the miss
        self.tried: dict[str, ToolCallRecord] = {
            signature(r.tool, r.arguments): r for r in subtask.tried_calls}
        # GGS blocks the tools a logical failure used, to force another method; a block that
        # leaves no tool (the local executor's only shell) cannot, and only wastes the round
        blocked = list(subtask.blocked_tools)
        self.blocked_tools = blocked if not blocked or set(self._tool_names()) - set(blocked) else []

    def _unmade(self) -> list[str]:
        """The files the goal makes that are still missing: while one is, the work goes on."""
        st = self.subtask
        return referents.unmade(st.referents, str(self.toolbox.workspace), st.goal or st.intent)

    def _tool_names(self) -> list[str]:
        # local: the small model fixates on the glob/search examples' "*.py"; shell does it all
        names = self.toolbox.available()
        return [n for n in names if n in LOCAL_TOOLS] or names if self.local else names

    # -- prompts ------------------------------------------------------------------------------
    def system_prompt(self) -> str:
        blocked = set(self.blocked_tools)
        tools = [TOOL_SPECS[n].usage for n in self._tool_names() if n not in blocked]
        template = _LOCAL_SYSTEM if self.local else _SYSTEM
        offered = [t for t in self.toolbox.offered_mcp(self._goal_text(), local=self.local)
                   if t.full_name not in blocked]
        mcp_lines = mcp.usage_lines(offered, local=self.local,
                                    budget=self.settings.mcp_prompt_chars)
        if mcp_lines and self.local:
            block = _LOCAL_MCP % "\n".join(mcp_lines)
            template = template.replace("Rules:\n", block.replace("{", "{{").replace("}", "}}") +
                                        "Rules:\n", 1)
        elif mcp_lines:
            tools += ["MCP tools (arguments as named; their results are tool output like any "
                      "other):", *mcp_lines]
        return template.format(workspace=self.toolbox.workspace, tools="\n".join(tools))

    def _mcp_fits(self) -> bool:
        """An MCP tool shares words with the goal (the local model is then offered TOOL:
        first)."""
        goal = mcp.words(self._goal_text())
        return any(mcp.score(t, goal) >= 3 for t in self.toolbox.offered_mcp(
            self._goal_text(), local=self.local))

    def _goal_text(self) -> str:
        return f"{self.subtask.goal}\n{self.subtask.intent}"

    def _mcp_args(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """A local `TOOL: name some text` gives the text to the tool's one required argument."""
        found = self.toolbox.mcp_tools().get(tool)
        if found is None or "__text__" not in args:
            return args
        schema = found.input_schema
        names = list(schema.get("required") or []) or list(schema.get("properties") or {})
        return {names[0]: args["__text__"]} if len(names) == 1 else args

    def user_prompt(self, correction: Optional[CorrectionSignal], calls: list[ToolCallRecord],
                    notes: list[str]) -> str:
        st = self.subtask
        lines = []
        if evidence.mentions_time(st.goal or st.intent):
            lines.append(f"Today's date: {time.strftime('%Y-%m-%d (%A)')}")
        if st.goal and " ".join(st.goal.split()) != " ".join(st.intent.split()):
            lines.append(f"Goal (the user's words): {st.goal}")
        lines.append(f"Subtask: {st.intent}")
        if self._overview is None:     # taken once: the prompt's prefix stays byte-stable
            self._overview = overview.workspace(self.toolbox.workspace,
                                                budget=self.output_chars,
                                                whole=referents.named_files(st.referents))
        lines.append(f"Workspace files (at the start):\n{self._overview}")
        where = referents.located(st.referents)
        if where:
            lines.append("Where the goal's names are: " + "; ".join(where))
        make = referents.to_make(st.referents)
        if make:
            lines.append("To make (each exactly this path, from the workspace folder): " +
                         ", ".join(make))
        if st.success_criteria and not self.local:   # local: the goal's own words say it
            lines.append("Success criteria:")
            lines += [f"{i}. {c.text}" for i, c in enumerate(st.success_criteria, 1)]
        if st.context:
            context = without_blocks(st.context, set(st.blocked_tools) - set(self.blocked_tools))
            lines.append(f"Context: {world.context_text(context, self.output_chars, head_tail)}")
        if st.deadline:
            lines.append(f"Deadline: {st.deadline}")
        if self.blocked_tools:
            lines.append(f"Do not use these tools: {', '.join(self.blocked_tools)}")
        if st.blocked_targets:
            targets = ", ".join(map(one_line, st.blocked_targets))
            lines.append(f"Do not touch these targets: {targets}")
        if correction is not None:
            lines.append(f"Your previous attempt was rejected by the validator. What was wrong: "
                         f"{correction.what_was_wrong or correction.failed_criterion}. "
                         f"What to do: {correction.what_to_do or 'use a different approach'}.")
            earlier = [describe_call(r) for r in self.history if r not in calls]
            if earlier:
                lines.append("Calls of the previous attempt (files they created still exist; do "
                             "not repeat the ones that failed):")
                lines += [f"- {e}" for e in earlier[-10:]]
        if calls:
            lines.append("Tool calls so far (newest last):")
            lines += self._transcript(calls)
        for note in notes:
            lines.append(note)
        if calls and self.local:
            lines.append("If a command output above answers the task, reply ANSWER: <the "
                         "value(s)>; otherwise reply with the next COMMAND:.")
        elif self.local:
            lines.append("Reply with your first TOOL: or COMMAND:." if self._mcp_fits()
                         else "Reply with your first PYTHON: program." if (self._python_first()
                         or spelt_out(correction, "PYTHON:")) and not spelt_out(correction)
                         else "Reply with your first COMMAND:.")
        elif calls:
            lines.append("If these results satisfy the criteria, reply with the result now; "
                         "otherwise make the next tool call.")
        else:
            lines.append("Reply with your first tool call (or the result if no tool is needed).")
        return "\n".join(lines)

    def _finish_from_output(self, record: ToolCallRecord, changed: bool, attempt: int,
                            unmade: list[str]) -> Optional[tuple[str, str]]:
        """The local attempt's result from a clean call that printed at most one short line,
        without asking the model again: (status, output), or None to ask it. In the benchmark
        logs the 1.5B model answered after every such output (never another command), and half
        of those answers were values the output did not show (`1` for a printed 9, a made-up
        number after a silent write). One line is the answer; nothing printed is a finished
        write when a file changed, else nothing found (for R4a to confirm or refute) — unless a
        file the goal makes is still missing: a first step (`mkdir`), the model goes on."""
        if record.law1 or (record.error and not evidence.no_match(record.error)):
            return None
        printed = [ln.strip() for ln in (record.output or "").splitlines()
                   if ln.strip() and ln.strip() != "(no output)" and not approval_note(ln)]
        if len(printed) > 1 or (printed and len(printed[0]) > 120):
            return None
        if not printed and unmade:
            return None
        if printed:
            found = ("completed", printed[0])
        elif changed:
            found = ("completed", SILENT_WRITE)
        elif evidence.asks_to_change(f"{self.subtask.goal}\n{self.subtask.intent}"):
            found = ("uncertain", "the command printed nothing and changed no file")
        else:
            found = ("not_possible", "nothing found: the command printed nothing")
        tasklog.append(self.settings.tasks_dir, self.task_id, "answer_from_output",
                       subtask_id=self.subtask.subtask_id, attempt=attempt, status=found[0],
                       output=found[1])
        return found

    def _run_fix(self, attempt: int, correction: Optional[CorrectionSignal],
                 calls: list[ToolCallRecord]) -> Optional[tuple[str, str]]:
        """Run the fix code composed for the last attempt's flaw (`fix_command`: write the
        printed result into the file, append after the missing newline) as this attempt's first
        call, through the same journal, gate and sandbox, without a model call: the model, told
        the exact command, copied it at best and spent a call of the task's budget doing so.
        (status, output) when it ran clean; None to go on with the model (it still sees the
        correction, and a failed fix's output)."""
        fix = (correction.fix_command or "").strip() if correction is not None else ""
        if not fix:
            return None
        args = {"command": fix}
        sig = signature("shell", args)
        record = self._run_once(attempt, 0, "shell", args, sig)
        calls.append(record)
        self.history.append(record)
        self._log_call(attempt, 0, "shell", args, record, by="code: the correction's fix")
        if record.error or record.law1:
            return None
        return ("completed", record.output)     # R4a says what changed, as after any write

    def _log_call(self, attempt: int, turn: int, tool: str, args: dict[str, Any],
                  record: ToolCallRecord, **extra: Any) -> None:
        tasklog.append(self.settings.tasks_dir, self.task_id, "tool_call",
                       subtask_id=self.subtask.subtask_id, attempt=attempt, turn=turn,
                       tool=tool, tool_input=args, tool_output=record.output[:500],
                       tool_error=record.error, law1=record.law1 or None,
                       law1_class=record.law1_class or None, elapsed_ms=record.elapsed_ms,
                       server=record.server or None, result_digest=record.digest or None,
                       **extra)

    def _python_first(self) -> bool:
        """The form the local model is asked for first: PYTHON: when the task reads a data
        file, and after a rejected shell command (a different first prompt, not the same
        command again). After a rejected program, a task on a data file asks for a program
        again: asked for a COMMAND: instead, the model's first reply was a `find` on the file it
        had read (`find build.log -type l | xargs rm`) in 40 of 76 dev retries, and 6 of the 76
        attempts were met, against 11 of 66 retries asked for a program. The retry's first reply
        is sampled freer (`_step`), so a program is not simply repeated (at temperature 0 it
        was, until refused: ebae469); one repeated verbatim is refused by code (`tried`)."""
        st = self.subtask
        data = names_data_file(f"{st.goal}\n{st.intent}", self.toolbox.workspace)
        if self.tried:
            return data or not list(self.tried.values())[-1].target.startswith(PYTHON_PREFIX)
        return data

    def _transcript(self, calls: list[ToolCallRecord]) -> list[str]:
        """The newest result in full (already cut to output_chars); older ones shortened when
        the transcript would exceed its budget."""
        out: list[str] = []
        budget = self.transcript_chars
        for i, rec in enumerate(reversed(calls)):
            n = len(calls) - i
            args = json.dumps(rec.arguments, ensure_ascii=False)
            head = f"#{n} {rec.tool} {args}"
            body = rec.output or ""
            if rec.error and rec.error not in body:
                body = f"ERROR: {rec.error}\n{body}" if body else f"ERROR: {rec.error}"
            if i > 0 and len(body) > budget:
                body = head_tail(body, max(200, min(400, budget)))
            budget -= len(body)
            out.append(f"{head}\n{body or '(no output)'}")
        return list(reversed(out))

    def _blocked(self, tool: str, args: dict[str, Any]) -> str:
        """GGS's blocked tools and targets, enforced in code (not only in the prompt)."""
        if tool in self.blocked_tools:
            return f"the tool {tool} is blocked for this subtask (it failed logically before)"
        targets = {" ".join(str(v).split()) for k, v in args.items() if k != "content"}
        for target in self.subtask.blocked_targets:
            if " ".join(target.split()) in targets:
                return (f"the target {target} is blocked for this subtask (it failed "
                        f"environmentally before); use another one")
        return ""

    def _step(self, system: str, prompt: str, *, freer: bool = False) -> ExecutorStep:
        """One step. `freer`: the model's last reply was not acted on (an answer held back for
        a missing file, a repeated or already-rejected call, an unreadable reply) and the note
        saying so is nearly all that changed in its prompt — at temperature 0 the local model
        then repeated its reply in 9 of 17 such re-asks in dev runs, a call spent for nothing —
        or this is the first step after a rejected attempt or round, whose first call the model
        repeated at temperature 0 (then refused by code, `tried`): it is sampled at the
        checker's resample temperature instead."""
        if self.local:
            return parse_local_step(self.llm.complete_text(
                system, prompt, task_id=self.task_id, max_tokens=LOCAL_MAX_TOKENS,
                temperature=RESAMPLE_TEMPERATURE if freer else None))
        return self.llm.complete_json(ExecutorStep, system, prompt, task_id=self.task_id)

    def _run_once(self, attempt: int, turn: int, tool: str, args: dict[str, Any], sig: str
                  ) -> ToolCallRecord:
        """Run a tool call at most once across restarts (services/runtime/journal.py): a call an
        earlier process finished is answered from its record; one it started and never finished
        is re-run only if the workspace shows no effect of it."""
        journal = self.journal
        key = ToolJournal.key(attempt, turn, sig)
        prior = journal.lookup(key) if journal else None
        ws = str(self.toolbox.workspace)
        # a call that cannot change anything is made again after a restart as it is: no picture
        # of the workspace to compare, no record that must reach the disk before it runs
        changes = bool(journal) and self.toolbox.may_change(tool, args)
        digest = evidence.digest(ws) if changes else ""
        if prior and prior.get("state") == "finished":
            tasklog.append(self.settings.tasks_dir, self.task_id, "tool_call_reused",
                           subtask_id=self.subtask.subtask_id, attempt=attempt, turn=turn,
                           tool=tool, tool_input=args)
            return ToolCallRecord(tool=tool, arguments=args, target=prior.get("target") or "",
                                  output=prior.get("output") or "", error=prior.get("error"),
                                  server=prior.get("server") or "",
                                  digest=prior.get("result_digest") or "")
        if prior and prior.get("state") == "started" and (
                prior.get("digest") != digest or not self.toolbox.rerun_safe(tool)):
            tasklog.append(self.settings.tasks_dir, self.task_id, "tool_call_unknown",
                           subtask_id=self.subtask.subtask_id, attempt=attempt, turn=turn,
                           tool=tool, tool_input=args)
            return ToolCallRecord(tool=tool, arguments=args, target="", output=(
                "NOT RUN AGAIN: this call was started before a restart and did not report back; "
                "the workspace changed since it started (or the tool may act outside it), so it "
                "may have done its work. Check the workspace instead of repeating it."))
        if journal:
            journal.started(key, tool, args, digest, durable=changes)
        started = time.monotonic()
        with telemetry.span(f"execute_tool {tool}", attrs={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                "gen_ai.tool.type": "function", "artoo.subtask.id": self.subtask.subtask_id,
                "artoo.attempt": attempt, "artoo.turn": turn,
                "artoo.sandbox": self.toolbox.sandbox.mode,
                "artoo.sandbox.network": self.toolbox.network}, task=self.task_id) as sp:
            out = self.toolbox.run(tool, args)
            sp.set("artoo.law1.class", out.law1_class)
            sp.set("artoo.law1.refused", out.law1)
            sp.set("artoo.tool.target", out.target[:200])
            if out.error:
                sp.error(out.error[:300])
        record = ToolCallRecord(tool=tool, arguments=args, target=out.target,
                                output=head_tail(out.output, self.output_chars),
                                error=out.error, law1=out.law1, law1_class=out.law1_class,
                                server=out.server, digest=out.digest,
                                elapsed_ms=round((time.monotonic() - started) * 1000, 1))
        if journal:
            journal.finished(key, record.output, record.error, record.target,
                             server=record.server, result_digest=record.digest)
        return record

    # -- one attempt --------------------------------------------------------------------------
    @telemetry.traced("attempt", task=lambda self, attempt, *a, **k: self.task_id,
                      attrs=lambda self, attempt, *a, **k: {
                          "artoo.attempt": attempt, "artoo.subtask.id": self.subtask.subtask_id})
    def run_attempt(self, attempt: int, correction: Optional[CorrectionSignal] = None
                    ) -> ExecutionResult:
        calls: list[ToolCallRecord] = []
        notes: list[str] = []
        last_sig: Optional[str] = None
        repeats = refused = 0
        held = False                           # an answer already held back for a missing file
        system = self.system_prompt()
        for record in self.history:            # the earlier attempts of this subtask
            self.tried[signature(record.tool, record.arguments)] = record
        # re-asked: the last reply was not acted on, or the last attempt (or round) rejected
        rejected = bool(self.tried)

        def result(status: str, output: Any, uncertainty: Optional[str] = None
                   ) -> ExecutionResult:
            return ExecutionResult(task_id=self.task_id, subtask_id=self.subtask.subtask_id,
                                   attempt=attempt, status=status, output=bound_output(output),
                                   uncertainty=uncertainty, tool_calls=list(calls))

        fixed = self._run_fix(attempt, correction, calls)
        if fixed is not None:
            return result(*fixed)
        for turn in range(1, self.max_turns + 1):
            prompt = self.user_prompt(correction, calls, notes)
            notes, freer, rejected = [], rejected, False
            try:
                step = self._step(system, prompt, freer=freer)
            except ValueError as exc:          # a local reply of no known form: say so, go on
                rejected = True
                notes.append(f"YOUR LAST REPLY WAS NOT USED: {exc}. Reply with one line: "
                             f"COMMAND: ..., ANSWER: ... or NOT POSSIBLE: ...")
                continue
            except BudgetSpent as exc:
                if calls:
                    # the budget ends the round with what it has: the last output is judged
                    # (the independent check has the call kept back for it)
                    return result("uncertain", calls[-1].output, f"executor stopped: {exc}")
                message = f"executor LLM error: {exc}"
                return result("failed", message, message)
            except LLMError as exc:
                message = f"executor LLM error: {exc}"
                return result("failed", message, message)
            except Exception as exc:  # a client bug must still end in a message
                message = f"executor LLM error: {type(exc).__name__}: {exc}"
                return result("failed", message, message)
            if step.action == "result":
                unmade = self._unmade() if self.local and not held and turn < self.max_turns \
                    and step.status not in ("not_possible", "failed") else []
                if unmade:
                    # an answer while a file the goal makes is missing is not done (Law 0 would
                    # reject it and a retry start over): once per attempt, the model goes on
                    held = rejected = True
                    notes += [f"NOT DONE: {p} DOES NOT EXIST YET. Make it with the next "
                              f"COMMAND." for p in unmade]
                    continue
                output = step.output
                if output in (None, "") and calls:
                    output = calls[-1].output
                status = step.status
                if self.local and status == "failed" and not any(c.error for c in calls):
                    # The small model says "failed" after clean tool runs it misread; let R4a
                    # judge the records instead of ending the subtask on that word.
                    status = "uncertain"
                return result(status, output, step.uncertainty)
            if step.answer_first and calls:
                # an answer given after this attempt's outputs, then a further call: the answer
                return result(step.status, step.output, None)
            tool = step.tool.strip()
            args = self._mcp_args(tool, step.tool_args())
            sig = signature(tool, args)
            if sig == last_sig:
                repeats += 1
                tasklog.append(self.settings.tasks_dir, self.task_id, "tool_call",
                               subtask_id=self.subtask.subtask_id, attempt=attempt, tool=tool,
                               tool_input=args, duplicate=True, executed=False)
                if self.local and step.output not in (None, ""):
                    # the repeat came with an answer: take it now (R4a judges it against the
                    # output it already saw) instead of spending a turn asking for it
                    return result(step.status, step.output, None)
                if repeats >= 2:
                    last = calls[-1].output if calls else None
                    return result("uncertain", last,
                                  f"executor stuck: requested the same {tool} call three times "
                                  f"in a row")
                rejected = True
                notes.append(f"DUPLICATE CALL NOT EXECUTED: #{len(calls)} was exactly this "
                             f"call; its result is above. Use a different call, or reply with "
                             f"the result." + (" Reply ANSWER: now, taken from that output."
                                               if self.local else ""))
                continue
            earlier = self.tried.get(sig)
            if earlier is not None and not any(c is earlier for c in calls):
                tasklog.append(self.settings.tasks_dir, self.task_id, "tool_call",
                               subtask_id=self.subtask.subtask_id, attempt=attempt, tool=tool,
                               tool_input=args, tried_before=True, executed=False)
                refused += 1
                if refused >= 2:
                    # "failed", not "uncertain": a retry of this subtask would be shown the same
                    # prompt and propose the same calls (seen: three rounds of two refusals each)
                    return result("failed" if not calls else "uncertain",
                                  calls[-1].output if calls else None,
                                  "executor stuck: it proposes only calls that already failed")
                shown = head_tail(earlier.output or earlier.error or "(no output)", 300)
                rejected = True
                notes.append(f"NOT RUN AGAIN: an earlier attempt already ran exactly this, and "
                             f"that attempt was rejected. It printed:\n{shown}\nUse a different "
                             f"approach" + (" (a PYTHON: program that parses the file is often "
                                            "clearer)" if self.local else "") + ".")
                continue
            last_sig, repeats = sig, 0
            blocked = self._blocked(tool, args)
            if blocked:
                record = ToolCallRecord(tool=tool, arguments=args, target=str(next(iter(
                    args.values()), "")), error=blocked)
            else:
                before = evidence.digest(str(self.toolbox.workspace)) if self.local else ""
                record = self._run_once(attempt, turn, tool, args, sig)
            calls.append(record)
            self.history.append(record)
            self._log_call(attempt, turn, tool, args, record)
            if self.local and _flattened_program(record):
                notes.append("YOUR `python3 -c` COMMAND IS NOT VALID PYTHON: its statements are "
                             "on one line. Reply PYTHON: and put the program on its own lines "
                             "below it.")
            if self.local and not blocked and tool == "shell":
                unmade = self._unmade()
                found = self._finish_from_output(
                    record, evidence.digest(str(self.toolbox.workspace)) != before, attempt,
                    unmade)
                if found is not None:
                    return result(*found)
                notes += [f"{p} DOES NOT EXIST YET: make it with the next COMMAND."
                          for p in unmade]
        last = "\n\n".join(f"{describe_call(r)}\n{r.output}" for r in calls[-3:]) or None
        return result("uncertain", last,
                      f"no final result after {self.max_turns} turns")
