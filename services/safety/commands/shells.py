"""Shells and interpreters: `sh -c STRING`, eval and trap strings are walked as shell code;
scripts, sourced files and interpreter code cannot be classified (unknown)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN
from ..words import Arg, word_parts
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


SHELLS = re.compile(r"^(ba|da|z|k|mk|c|tc|fi|a|po)?sh$|^busybox$")
INTERPRETERS = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|ipython[0-9.]*|perl[0-9.]*|ruby[0-9.]*|irb|node(js)?|deno|bun|"
    r"php[0-9.]*|lua[0-9.]*|luajit|rscript|r|julia|java|jshell|osascript|pwsh|powershell|tclsh|"
    r"wish|expect|groovy|scala|kotlin|swift|go|cargo|rustc|gcc|cc|clang|g\+\+|make|cmake|ninja|"
    r"npx|pnpx|uvx|uv|poetry|pipx|gradle|mvn|ant|sbt|dotnet|erl|elixir|iex|guile|racket|sbcl|"
    r"ghc|runghc|stack|ocaml|nim|zig|v|crystal|dart|flutter|php-cgi|awk-script)$", re.I)
VERSION_FLAGS = frozenset({"--version", "-V", "-v", "--help", "-h", "version", "-version"})


@handles(pattern=SHELLS)
def shell(w: Walker, base: str, args: list[Arg]) -> None:
    if base == "busybox":
        if args:
            w.run(args)
        return
    if args and all(a.text in VERSION_FLAGS for a in args):
        return
    for i, a in enumerate(args):
        if a.text == "-c" or (a.text.startswith("-") and not a.text.startswith("--")
                              and a.text.endswith("c")):
            if i + 1 >= len(args):
                w.add(UNKNOWN, f"{base} -c without a command")
                return
            script = args[i + 1]
            if script.node is not None and any(p.kind != "tilde"
                                               for p in word_parts(script.node)):
                w.add(UNKNOWN, f"{base} -c runs a command built at run time")
                return
            w.shell_string(script.text, f"{base} -c: ")
            return
        if a.text.startswith("-") or a.text.startswith("+"):
            continue
        w.add(UNKNOWN, f"{base} runs the script {a.text}; its content is not checked")
        return
    w.add(UNKNOWN, f"{base} runs commands from its input")


@handles("eval")
def eval_(w: Walker, base: str, args: list[Arg]) -> None:
    if any(a.node is not None and any(p.kind in ("parameter", "commandsubstitution")
                                      for p in word_parts(a.node)) for a in args):
        w.add(UNKNOWN, "eval runs a command built at run time")
        return
    w.shell_string(" ".join(a.text for a in args), "eval: ")


@handles("source", ".")
def source(w: Walker, base: str, args: list[Arg]) -> None:
    w.add(UNKNOWN, f"{base} runs the script {args[0].text if args else ''}; "
                      f"its content is not checked")


@handles("trap")
def trap(w: Walker, base: str, args: list[Arg]) -> None:
    if args and not args[0].text.startswith("-"):
        w.shell_string(args[0].text, "trap: ")


@handles(pattern=INTERPRETERS)
def interpreter(w: Walker, base: str, args: list[Arg]) -> None:
    if args and all(a.text in VERSION_FLAGS for a in args):
        return
    low = base.lower()
    if low.startswith("perl") and any(re.match(r"^-[a-zA-Z]*i", a.text) for a in args):
        w.add(DESTRUCTIVE, "perl -i edits files in place")
        return
    if low in ("go", "cargo") and args and args[0].text in ("version", "env", "list", "doc",
                                                            "help", "vet", "--version"):
        return
    w.add(UNKNOWN, f"{base} runs code whose effect cannot be classified")
