"""The plain ReAct baseline of the agent benchmark: one model, one `shell` tool, at most 10 steps.

    .venv/bin/python benchmarks/agent/react.py --workspace WS "GOAL"   # prints the result JSON

Each step the model replies with one JSON object {"thought", "action": "shell"|"finish",
"command", "answer", "possible"}; a shell action runs `bash -c COMMAND` in the workspace (30 s,
stdout+stderr cut to 1000 characters) and the output is the next observation. Temperature 0,
256 tokens per step. Like any plain ReAct loop it claims success whenever it answers: status
"verified" on finish with possible=true, "not_possible" with possible=false, "error" when it runs
out of steps or the endpoint fails. Endpoint: --base-url / OPENAI_BASE_URL (+ OPENAI_API_KEY,
OPENAI_MODEL), else the artoo daemon's bundled llama.cpp server; the model defaults to the
first id the endpoint's /v1/models lists.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MAX_STEPS = 10
OUTPUT_CHARS = 1000
SHELL_TIMEOUT_S = 30
MAX_TOKENS = 256

SYSTEM = f"""You are an assistant that achieves a user's goal by running shell commands.
You work in the current directory (the user's workspace); use relative paths and stay in it.
Reply with exactly one JSON object per turn, in one of these forms:
{{"thought": "<your reasoning>", "action": "shell", "command": "<one bash command>"}}
  runs the command; its output comes back to you as the next message.
{{"thought": "<your reasoning>", "action": "finish", "answer": "<the result for the user>", "possible": true}}
  ends the task: the answer states the result in plain words (for a question, the value asked
  for; for a task, what you did).
{{"thought": "<your reasoning>", "action": "finish", "answer": "<why not>", "possible": false}}
  ends the task when the goal cannot be done (for example, the thing asked for does not exist).
Look at the files before you answer, and check your work. You have at most {MAX_STEPS} turns."""

SCHEMA = {  # the reply shape, passed to llama.cpp as a grammar (other servers ignore or refuse it)
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"type": "string", "enum": ["shell", "finish"]},
        "command": {"type": "string"},
        "answer": {"type": "string"},
        "possible": {"type": "boolean"},
    },
    "required": ["thought", "action"],
}


def resolve_endpoint(base_url: str | None = None, model: str | None = None,
                     api_key: str | None = None) -> tuple[str, str, str]:
    """(base_url, api_key, model): the arguments, the OPENAI_* environment, or artoo's local
    llama.cpp server; the model defaults to the endpoint's first listed id."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL")
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or "none"
    model = model or os.environ.get("OPENAI_MODEL")
    if not base_url:
        repo = Path(__file__).resolve().parents[2]
        sys.path.insert(0, str(repo))
        from protocol.settings import load_settings
        from services.runtime.local_model import local_base_url
        base_url = local_base_url(load_settings())
    base_url = base_url.rstrip("/")
    if not model:
        import openai
        models = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=30).models.list()
        model = models.data[0].id
    return base_url, api_key, model


def run_shell(command: str, workspace: Path) -> str:
    try:
        proc = subprocess.run(["bash", "-c", command], cwd=workspace, capture_output=True,
                              text=True, errors="replace", timeout=SHELL_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, code = f"{exc.stdout or ''}{exc.stderr or ''}\n[timed out after {SHELL_TIMEOUT_S} s]", 124
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    out = out if len(out) <= OUTPUT_CHARS else out[:OUTPUT_CHARS] + "\n[output truncated]"
    return f"exit code {code}\n{out}" if out.strip() else f"exit code {code} (no output)"


def parse_reply(text: str) -> dict:
    text = (text or "").strip()
    try:
        data = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        data = json.loads(text[start:end + 1]) if 0 <= start < end else {}
    return data if isinstance(data, dict) else {}


def react(goal: str, workspace: Path, *, base_url: str | None = None, model: str | None = None,
          api_key: str | None = None, schema: bool = True, max_steps: int = MAX_STEPS,
          log=None) -> dict:
    import openai
    started = time.monotonic()
    out = {"answer": "", "status": "error", "llm_calls": 0, "prompt_tokens": 0,
           "completion_tokens": 0, "seconds": 0.0, "steps": []}
    try:
        base_url, api_key, model = resolve_endpoint(base_url, model, api_key)
        client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=300, max_retries=0)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Goal: {goal}"}]
        fmt = {"type": "json_object", "schema": SCHEMA} if schema else {"type": "json_object"}
        for step in range(1, max_steps + 1):
            resp = client.chat.completions.create(model=model, messages=messages, temperature=0,
                                                  max_tokens=MAX_TOKENS, response_format=fmt)
            out["llm_calls"] += 1
            if resp.usage:
                out["prompt_tokens"] += resp.usage.prompt_tokens or 0
                out["completion_tokens"] += resp.usage.completion_tokens or 0
            text = resp.choices[0].message.content or ""
            messages.append({"role": "assistant", "content": text})
            reply = parse_reply(text)
            out["steps"].append(reply or {"unparsed": text[:500]})
            if log:
                log(f"step {step}: {json.dumps(reply or text, ensure_ascii=False)[:300]}")
            if reply.get("action") == "finish":
                out["answer"] = str(reply.get("answer") or "")
                out["status"] = "not_possible" if reply.get("possible") is False else "verified"
                break
            if reply.get("action") == "shell" and str(reply.get("command") or "").strip():
                observation = run_shell(str(reply["command"]), workspace)
                if log:
                    log(f"  -> {observation[:200]!r}")
            else:
                observation = ('Invalid reply: give one JSON object with "action": "shell" and a '
                               '"command", or "action": "finish" with "answer" and "possible".')
            left = max_steps - step
            messages.append({"role": "user", "content": f"{observation}\n({left} turns left)"})
        else:
            out["answer"] = f"ran out of steps ({max_steps})"
    except Exception as exc:  # noqa: BLE001 - the benchmark records any failure as an error
        out["answer"] = out["answer"] or f"error: {type(exc).__name__}: {exc}"[:500]
        out["status"] = "error"
    out["seconds"] = round(time.monotonic() - started, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("goal")
    ap.add_argument("--workspace", required=True, type=Path)
    ap.add_argument("--base-url")
    ap.add_argument("--model")
    ap.add_argument("--no-schema", action="store_true", help="plain json_object, no grammar")
    ap.add_argument("-v", "--verbose", action="store_true", help="log each step to stderr")
    args = ap.parse_args(argv)
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.verbose else None
    result = react(args.goal, args.workspace.resolve(), base_url=args.base_url, model=args.model,
                   schema=not args.no_schema, log=log)
    print(json.dumps(result, ensure_ascii=False))
    return 0 if result["status"] != "error" else 1


if __name__ == "__main__":
    sys.exit(main())
