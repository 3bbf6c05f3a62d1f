"""The llama.cpp build variants against each other: prompt reading and generation speed.

`scripts/install-local-model` builds llama-cpp-python for the CPU's vector extensions (a
`portable` AVX2 build, or `avx512` / `avx512-vnni` where the CPU has them) and caches each wheel in
`~/.cache/artoo/wheels/<variant>`. This benchmark installs every cached variant into a temporary
directory and runs the same real pipeline prompts (`benchmarks/llm_prompts.json`: executor and
checker prompts of dev goals) through each, rounds interleaved, in a fresh process per variant and
round: the whole prompt read from an empty context (its time is what grows with a prompt), then up
to 48 tokens generated greedily. Prints tokens per second per variant, the ratio against
`portable` (the baseline) and whether the greedy replies are the same text.

Run: `.venv/bin/python benchmarks/bench_llama_build.py [--rounds N] [--json]`; build the portable
wheel too with `ARTOO_LLAMA_CPU=portable bash scripts/install-local-model` (then install the
machine's own variant again with `bash scripts/install-local-model`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
PROMPTS = Path(__file__).resolve().parent / "llm_prompts.json"
VERSION = "0.3.36"
NEW_TOKENS = 48


def child(model: str) -> None:
    """One variant, one round: prompt reading and greedy generation over every prompt."""
    from llama_cpp import Llama, llama_print_system_info
    llm = Llama(model_path=model, n_ctx=4096, n_threads=os.cpu_count() or 1, logits_all=False,
                verbose=False)
    read_s = gen_s = 0.0
    read_n = gen_n = 0
    replies = []
    end = llm.tokenize(b"<|im_end|>", add_bos=False, special=True)
    for messages in json.loads(PROMPTS.read_text()):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        tokens = llm.tokenize((text + "<|im_start|>assistant\n").encode(), add_bos=False,
                              special=True)
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        t1 = time.perf_counter()
        out: list[int] = []
        for _ in range(NEW_TOKENS):
            token = llm.sample(temp=0.0)
            if token == llm.token_eos() or [token] == end:
                break
            out.append(token)
            llm.eval([token])
        t2 = time.perf_counter()
        read_s, read_n = read_s + t1 - t0, read_n + len(tokens)
        gen_s, gen_n = gen_s + t2 - t1, gen_n + len(out)
        replies.append(llm.detokenize(out).decode(errors="replace"))
    print(json.dumps({"read_tok_s": read_n / read_s, "gen_tok_s": gen_n / max(gen_s, 1e-9),
                      "read_tokens": read_n, "gen_tokens": gen_n, "replies": replies,
                      "cpu": llama_print_system_info().decode().strip()}))


def cached_wheels(root: Path) -> dict[str, Path]:
    """Every variant with a wheel of VERSION in the cache (the flat layout before variants was
    the portable build)."""
    found = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        wheels = sorted(d.glob(f"llama_cpp_python-{VERSION}-*.whl"))
        if wheels:
            found[d.name] = wheels[0]
    flat = sorted(root.glob(f"llama_cpp_python-{VERSION}-*.whl")) if root.is_dir() else []
    if flat and "portable" not in found:
        found["portable"] = flat[0]
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    from protocol.settings import load_settings
    from services.runtime.local_model import model_path
    model = str(model_path(load_settings()))
    if args.child:
        child(model)
        return 0
    wheels = cached_wheels(Path(os.environ.get("ARTOO_WHEEL_CACHE",
                                               Path.home() / ".cache/artoo/wheels")))
    if not wheels:
        print("no cached llama-cpp-python wheel: run `bash scripts/install-local-model`",
              file=sys.stderr)
        return 2
    if not os.path.exists(model):
        print(f"no model at {model}: run `bash scripts/install-local-model`", file=sys.stderr)
        return 2
    runs: dict[str, list[dict]] = {v: [] for v in wheels}
    with tempfile.TemporaryDirectory(prefix="artoo-llama-builds-") as tmp:
        for variant, wheel in wheels.items():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                            os.path.join(tmp, variant), str(wheel)], check=True)
        for _ in range(args.rounds):
            for variant in wheels:
                env = dict(os.environ, PYTHONPATH=os.path.join(tmp, variant))
                out = subprocess.run([sys.executable, __file__, "--child", "1"], env=env,
                                     check=True, capture_output=True, text=True).stdout
                runs[variant].append(json.loads(out.strip().splitlines()[-1]))
    base = runs.get("portable")
    report = {}
    for variant, rs in runs.items():
        read = statistics.median(r["read_tok_s"] for r in rs)
        gen = statistics.median(r["gen_tok_s"] for r in rs)
        report[variant] = {
            "read_tok_s": round(read, 1), "gen_tok_s": round(gen, 2),
            "read_tokens": rs[0]["read_tokens"], "cpu": rs[0]["cpu"],
            "read_vs_portable": round(read / statistics.median(
                r["read_tok_s"] for r in base), 2) if base else None,
            "gen_vs_portable": round(gen / statistics.median(
                r["gen_tok_s"] for r in base), 2) if base else None,
            "same_replies_as_portable": (sum(a == b for a, b in zip(rs[0]["replies"],
                                                                    base[0]["replies"]))
                                         if base else None),
            "prompts": len(rs[0]["replies"]),
        }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"model {model}, {args.rounds} rounds interleaved, {os.cpu_count()} threads, "
          f"{report[next(iter(report))]['read_tokens']} prompt tokens per round")
    print(f"{'variant':12} {'prompt read tok/s':>18} {'vs portable':>12} {'generate tok/s':>15} "
          f"{'vs portable':>12} {'same replies':>13}")
    for variant, r in report.items():
        same = (f"{r['same_replies_as_portable']}/{r['prompts']}"
                if r["same_replies_as_portable"] is not None else "-")
        print(f"{variant:12} {r['read_tok_s']:>18} {str(r['read_vs_portable'] or '-'):>12} "
              f"{r['gen_tok_s']:>15} {str(r['gen_vs_portable'] or '-'):>12} {same:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
