"""Text tools whose options write files or run code: sort -o, uniq OUT, sed (-i, w/e), awk
(system(), -i inplace), iconv -o, split/csplit, patch."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN, WORKSPACE_WRITE
from ..words import Arg, positional_args
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


@handles("sort")
def sort(w: Walker, base: str, args: list[Arg]) -> None:
    for i, a in enumerate(args):
        if a.text in ("-o", "--output") and i + 1 < len(args):
            w.write(args[i + 1], "truncate", "writes")
        elif a.text.startswith("--output="):
            w.write(Arg(a.text.split("=", 1)[1], a.node), "truncate", "writes")
        elif a.text.startswith("-o") and len(a.text) > 2 and not a.text.startswith("--"):
            w.write(Arg(a.text[2:], a.node), "truncate", "writes")
        elif not a.text.startswith("-"):
            w.read(a)


@handles("uniq")
def uniq(w: Walker, base: str, args: list[Arg]) -> None:
    positional = positional_args(args, takes_value={"-f", "-s", "-w", "--skip-fields",
                                                    "--skip-chars", "--check-chars"})
    if positional:
        w.read(positional[0])
    if len(positional) >= 2:
        w.write(positional[1], "truncate", "writes")


@handles("sed", "gsed")
def sed(w: Walker, base: str, args: list[Arg]) -> None:
    in_place = any(a.text.startswith("--in-place") or (a.text.startswith("-") and
                                                      not a.text.startswith("--")
                                                      and ("i" in a.text[1:] or
                                                           "I" in a.text[1:]))
                   for a in args)
    scripts: list[str] = []
    files: list[Arg] = []
    expect_script = True
    i = 0
    while i < len(args):
        a = args[i]
        if a.text in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1].text)
            expect_script = False
            i += 2
            continue
        if a.text in ("-f", "--file") and i + 1 < len(args):
            w.read(args[i + 1])
            expect_script = False
            scripts.append("")
            i += 2
            continue
        if a.text.startswith("--expression="):
            scripts.append(a.text.split("=", 1)[1])
            expect_script = False
        elif a.text.startswith("-") and a.text != "-":
            pass
        elif expect_script:
            scripts.append(a.text)
            expect_script = False
        else:
            files.append(a)
        i += 1
    if in_place:
        for f in files:
            w.write(f, "modify", "edits in place")
        if not files:
            w.add(DESTRUCTIVE, "sed -i edits files in place")
        return
    for s in scripts:
        if re.search(r"(^|[;}\n]|[0-9$/]\s*)\s*[wWe]\b|/[gpiImMe0-9]*[we](\s|$)", s):
            w.add(UNKNOWN, "the sed script writes files or runs commands (w/e)")
    for f in files:
        w.read(f)


@handles("awk", "gawk", "mawk", "nawk")
def awk(w: Walker, base: str, args: list[Arg]) -> None:
    program = None
    files: list[Arg] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.text in ("-f", "--file", "-v", "-F", "--assign", "--field-separator") \
                and i + 1 < len(args):
            if a.text in ("-f", "--file"):
                w.add(UNKNOWN, f"{base} runs a program file")
                program = ""
            i += 2
            continue
        if a.text in ("-i", "--include") or a.text.startswith("-i"):
            w.add(DESTRUCTIVE, f"{base} -i inplace edits files")
            return
        if a.text.startswith("-"):
            i += 1
            continue
        if program is None:
            program = a.text
        else:
            files.append(a)
        i += 1
    if program and re.search(r"\bsystem\s*\(|\|\s*getline|\bprintf?\b[^;{}]*(>|\|)|"
                             r"\bfflush\b|\bclose\s*\(", program):
        w.add(UNKNOWN, f"the {base} program writes files or runs commands")
    for f in files:
        if "=" not in f.text:
            w.read(f)


@handles("iconv")
def iconv(w: Walker, base: str, args: list[Arg]) -> None:
    for i, a in enumerate(args):
        if a.text in ("-o", "--output") and i + 1 < len(args):
            w.write(args[i + 1], "truncate", "writes")
        elif a.text.startswith("--output="):
            w.write(Arg(a.text.split("=", 1)[1], a.node), "truncate", "writes")


@handles("split", "csplit")
def split(w: Walker, base: str, args: list[Arg]) -> None:
    in_ws = w.ctx.cwd is not None and w.where(w.ctx.cwd) == "workspace"
    w.add(WORKSPACE_WRITE if in_ws else DESTRUCTIVE,
          f"{base} writes new files into the working directory")


@handles("patch")
def patch(w: Walker, base: str, args: list[Arg]) -> None:
    if any(a.text in ("--dry-run", "-C", "--check") for a in args):
        return
    w.add(DESTRUCTIVE, "patch modifies files in place", snapshot=w.cwd_snapshot())
