"""The `llm` program: llama-cpp-python's OpenAI-compatible server, with a lean prompt cache.

`python -m services.runtime.llm_server <llama_cpp.server options>` runs `python -m llama_cpp.server` after
one patch. The server's `--cache` keeps the state after each request so a role's unchanged system
prompt is not read again (measured 10-30x faster repeat calls on 2 cores). But every cached state
also carries a copy of the `scores` matrix (up to n_batch x n_vocab floats: 311 MB for Qwen's
151,936-token vocabulary), which `--cache_size` does not count, so a 1 GiB cache could grow the
process by tens of GB. Without `logits_all` those scores are never written nor read (sampling
works on the context's own logits and a restored state re-evaluates its last token), so only one
row is kept: the cache then costs what `--cache_size` says.
"""
from __future__ import annotations

import runpy
import sys


def patch_lean_cache_states() -> None:
    from llama_cpp import Llama

    if getattr(Llama.save_state, "_artoo_lean", False):
        return
    original = Llama.save_state

    def save_state(self):
        if self._logits_all:
            return original(self)
        full = self.scores
        self.scores = full[:1]        # `_scores` slices this: the state copies one row
        try:
            return original(self)     # load_state broadcasts the row back: values are unused
        finally:
            self.scores = full

    save_state._artoo_lean = True
    Llama.save_state = save_state


def main() -> None:
    patch_lean_cache_states()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
