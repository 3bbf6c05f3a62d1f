"""find (-delete, -exec/-ok, -fprint) and xargs: the programs they run are classified as well,
with arguments known only at run time."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN
from ..words import Arg
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


@handles("find", "gfind")
def find(w: Walker, base: str, args: list[Arg]) -> None:
    roots: list[Arg] = []
    i = 0
    while i < len(args) and not (args[i].text.startswith("-") or args[i].text in ("(", "!",
                                                                                ")")):
        roots.append(args[i])
        i += 1
    root_paths = [p for p in (w.resolve(r) for r in roots) if p] if roots else \
        ([w.ctx.cwd] if w.ctx.cwd else [])
    snap = [p for p in root_paths if w.where(p) == "workspace"]
    for r in roots:
        w.read(r)
    outside = [p for p in root_paths if w.where(p) == "outside"]
    where = ", ".join(root_paths) or "paths known only at run time"
    while i < len(args):
        text = args[i].text
        if text == "-delete":
            w.add(DESTRUCTIVE, f"find -delete removes files under {where}",
                  snapshot=[] if outside else snap)
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[Arg] = []
            i += 1
            while i < len(args) and args[i].text not in (";", "+", "\\;"):
                inner.append(args[i])
                i += 1
            if not inner:
                w.add(UNKNOWN, f"find {text} without a command")
            else:
                before = len(w.findings)
                w.run(inner)
                for f in w.findings[before:]:
                    if f.level == DESTRUCTIVE and not f.snapshot and not outside:
                        f.snapshot = tuple(snap)
                    f.reason = f"find {text}: {f.reason}"
        elif text in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(args):
            w.write(args[i + 1], "truncate", "writes")
            i += 1
        i += 1


@handles("xargs")
def xargs(w: Walker, base: str, args: list[Arg]) -> None:
    takes = {"-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-L", "-l", "-n",
             "--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"}
    i = 0
    while i < len(args):
        text = args[i].text
        if text in ("-a", "--arg-file") and i + 1 < len(args):
            w.read(args[i + 1])
        if text in takes:
            i += 2
            continue
        if text.startswith("-"):
            i += 1
            continue
        break
    inner = args[i:]
    if not inner:
        return                              # plain xargs echoes its input
    w.run(inner + [Arg("<input>", opaque=True)])
