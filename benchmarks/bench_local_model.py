"""Bundled local model benchmarks (issue 8): assembly, verification, server load, request speed.

Figures: assembling the GGUF from the installed part packages (a plain copy of the same bytes is
the baseline, measured in the same run), reusing it through the stamp, a full re-hash; starting the
server with the exact `[program:llm]` command of supervisord.conf until its API answers; then,
through the OpenAI-compatible endpoint with the `openai` SDK, prompt reading and generation speed,
a schema-constrained JSON request (the shape the pipeline uses) against unconstrained JSON mode,
and the prompt cache (the same long system prompt asked again).
Run: `.venv/bin/python benchmarks/bench_local_model.py [--json]` after `bash scripts/install-local-model`.
"""
from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import openai  # noqa: E402
import psutil  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from protocol.settings import load_settings  # noqa: E402
from services.runtime import local_model as lm  # noqa: E402


class Step(BaseModel):
    tool: Literal["shell", "write_file", "read_file", "list_dir"]
    argument: str


class Plan(BaseModel):
    summary: str
    steps: list[Step] = Field(max_length=4)


SYSTEM = ("You are the planner of a small agent system. Tools: shell, write_file, read_file, "
          "list_dir. Reply with JSON only: a one-line summary and at most 4 steps.")
GOALS = ["Write today's date into date.txt, then list the workspace.",
         "Count the .py files under src/ and write the number into count.txt.",
         "Read the value of 'port' from config.ini and write it into port.txt."]
LONG_SYSTEM = SYSTEM + " " + " ".join(f"Rule {i}: keep step {i} short and exact." for i in range(45))


def timed(fn):
    started = time.monotonic()
    value = fn()
    return time.monotonic() - started, value


def assembly_figures(install_settings) -> dict:
    parts = lm.part_files()
    with tempfile.TemporaryDirectory(prefix="bench-lm-") as tmp:
        s = load_settings(home=Path(tmp) / "home", run_dir_override=str(Path(tmp) / "run"),
                          local_model_path="")
        copy_s, _ = timed(lambda: _plain_copy(parts, Path(tmp) / "copy.bin"))
        (Path(tmp) / "copy.bin").unlink()
        assemble_s, path = timed(lambda: lm.ensure_model(s))
        reuse_s, _ = timed(lambda: lm.ensure_model(s))
        rehash_s, digest = timed(lambda: lm.file_sha256(path))
        assert digest == lm.BUNDLED.sha256
    return {"parts": len(parts), "bytes": lm.BUNDLED.size, "plain_copy_s": round(copy_s, 2),
            "assemble_verify_s": round(assemble_s, 2), "reuse_ms": round(reuse_s * 1000, 2),
            "rehash_s": round(rehash_s, 2)}


def _plain_copy(parts: list[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, 8 << 20)
        out.flush()
        os.fsync(out.fileno())


def server_command(env: dict[str, str]) -> list[str]:
    """`[program:llm]`'s command from supervisord.conf with its %(ENV_X)s expanded."""
    parser = configparser.RawConfigParser()
    parser.read(REPO / "supervisord.conf")
    command = parser.get("program:llm", "command")
    return shlex.split(re.sub(r"%\(ENV_(\w+)\)s", lambda m: env[m.group(1)], command))


def start_server(env: dict[str, str], extra: list[str], log_path: Path):
    log = open(log_path, "wb")
    proc = subprocess.Popen(server_command(env) + extra, stdout=log, stderr=subprocess.STDOUT,
                            cwd=REPO, start_new_session=True)
    log.close()
    return proc


def run_config(s, env: dict[str, str], extra: list[str], log_path: Path, full: bool) -> dict:
    """Start the server (the conf's command + `extra`), time its readiness, then the requests."""
    started = time.monotonic()
    proc = start_server(env, extra, log_path)
    try:
        url = lm.local_base_url(s)
        while not lm.server_answers(url):
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}: see {log_path}")
            time.sleep(0.05)
        out = {"server_ready_s": round(time.monotonic() - started, 2)}
        out.update(request_figures(url, lm.served_model_name(s), full))
        out["server_rss_mb"] = psutil.Process(proc.pid).memory_info().rss >> 20
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-assembly", action="store_true")
    args = ap.parse_args()
    install_settings = load_settings()
    model = lm.ensure_model(install_settings)
    figures: dict = {"model": str(model), "cpus": os.cpu_count(),
                     "load_avg_at_start": round(os.getloadavg()[0], 1)}
    if not args.skip_assembly and not install_settings.local_model_path:
        figures["assembly"] = assembly_figures(install_settings)
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        s = load_settings(home=Path(tmp) / "home", run_dir_override=str(Path(tmp) / "run"),
                          local_model_path=str(model))
        env = {"ARTOO_PYTHON": sys.executable, **lm.llm_env(s, {})}
        figures["threads"] = int(env["ARTOO_LLM_THREADS"])
        figures["artoo_llm"] = run_config(s, env, [], Path(tmp) / "llm.log", full=True)
        # baseline: the library's server defaults (logits for every token, no prompt cache)
        figures["library_defaults"] = run_config(
            s, env, ["--logits_all", "true", "--cache", "false"], Path(tmp) / "base.log", full=False)
    ours, base = figures["artoo_llm"], figures["library_defaults"]
    figures["prompt_read_speedup_vs_defaults"] = round(
        ours["prompt_tokens_per_s"] / base["prompt_tokens_per_s"], 2)
    figures["alternating_repeat_speedup_vs_defaults"] = round(
        base["alternating_repeat_s"] / ours["alternating_repeat_s"], 1)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        if isinstance(value, dict):
            print(key)
            for k, v in value.items():
                print(f"  {k:30s} {v}")
        else:
            print(f"{key:32s} {value}")


def request_figures(url: str, model: str, full: bool) -> dict:
    client = openai.OpenAI(base_url=url, api_key="local", max_retries=0, timeout=900)

    def ask(system: str, user: str, fmt: dict | None, max_tokens: int):
        kwargs = {"response_format": fmt} if fmt else {}
        return timed(lambda: client.chat.completions.create(
            model=model, messages=[{"role": "system", "content": system},
                                   {"role": "user", "content": user}],
            max_tokens=max_tokens, temperature=0.2, **kwargs))

    out: dict = {}
    first_s, _ = ask("Say OK.", "OK?", None, 2)
    out["first_request_s"] = round(first_s, 2)
    # Prompt reading: long, never-seen system prompts (two roles), one output token each.
    read_s, resp = ask(LONG_SYSTEM, "Reply OK.", None, 1)
    out["prompt_tokens"] = resp.usage.prompt_tokens
    out["prompt_read_s"] = round(read_s, 2)
    out["prompt_tokens_per_s"] = round(resp.usage.prompt_tokens / read_s, 1)
    ask("Another role. " + LONG_SYSTEM, "Reply OK.", None, 1)
    # The first role again, as the pipeline alternates roles: re-read, or restored from the cache.
    again_s, _ = ask(LONG_SYSTEM, "Reply OK, please.", None, 1)
    out["alternating_repeat_s"] = round(again_s, 2)
    if not full:
        return out
    # Constrained JSON (the pipeline's request shape) against unconstrained JSON mode.
    schema_fmt = {"type": "json_object", "schema": Plan.model_json_schema()}
    for label, fmt in (("schema", schema_fmt), ("json_object", {"type": "json_object"})):
        lat, toks, valid = [], [], 0
        for goal in GOALS:
            elapsed, resp = ask(SYSTEM, goal, fmt, 200)
            try:
                Plan.model_validate_json(resp.choices[0].message.content or "")
                valid += 1
            except ValueError:
                pass
            lat.append(elapsed)
            toks.append(resp.usage.completion_tokens)
        out[f"{label}_latency_s"] = [round(x, 1) for x in lat]
        out[f"{label}_completion_tokens"] = toks
        # end to end, system prompt cached: what a role sees per generated token
        out[f"{label}_tokens_per_s"] = round(sum(toks[1:]) / sum(lat[1:]), 1)
        out[f"{label}_valid_plans"] = f"{valid}/{len(GOALS)}"
    return out


if __name__ == "__main__":
    main()
