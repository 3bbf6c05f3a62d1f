"""Programs that delete, truncate, copy, move, link, create or change files: rm and friends,
truncate, dd, cp/mv/install, ln, mkdir/touch/mktemp, chmod/chown/chgrp, tee."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN, WORKSPACE_WRITE
from ..paths import exists
from ..words import Arg, positional_args
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


DELETERS = frozenset({"rm", "rmdir", "unlink", "shred", "srm", "wipe", "trash", "trash-put",
                      "gio"})


@handles(*DELETERS)
def rm(w: Walker, base: str, args: list[Arg]) -> None:
    if base == "gio" and (not args or args[0].text not in ("trash", "remove", "rm")):
        w.add(UNKNOWN, "gio: effect cannot be classified")
        return
    targets = positional_args(args)
    if base == "gio":
        targets = targets[1:]
    if not targets:
        w.add(DESTRUCTIVE, f"{base} deletes files")
        return
    for target in targets:
        w.delete(target, "shreds" if base in ("shred", "srm", "wipe") else "deletes")


@handles("truncate")
def truncate(w: Walker, base: str, args: list[Arg]) -> None:
    targets = positional_args(args, takes_value={"-s", "--size", "-r", "--reference", "-o"})
    if not targets:
        w.add(DESTRUCTIVE, "truncate changes file sizes")
    for target in targets:
        w.delete(target, "truncates")


@handles("dd")
def dd(w: Walker, base: str, args: list[Arg]) -> None:
    for a in args:
        if a.text.startswith("of="):
            target = Arg(a.text[3:], a.node, a.opaque)
            path = w.resolve(target)
            if path is not None and w.where(path) == "protected":
                w.protected_hit(path)
            elif path is None or w.where(path) != "null":
                paths = [path] if path and w.where(path) == "workspace" and exists(path) \
                    else []
                w.add(DESTRUCTIVE, f"dd writes raw data to {target.text}", paths=paths)
        elif a.text.startswith("if="):
            w.read(Arg(a.text[3:], a.node, a.opaque))


@handles("cp", "mv", "install")
def copy_move(w: Walker, base: str, args: list[Arg]) -> None:
    takes = {"-t", "--target-directory", "-S", "--suffix", "--backup", "-m", "--mode",
             "-o", "--owner", "-g", "--group", "--sparse", "--reflink"}
    if base == "install":
        takes = takes | {"-m", "-o", "-g"}
    no_clobber = any(a.text in ("-n", "--no-clobber", "--update=none", "--update=none-fail")
                     or (a.text.startswith("-") and not a.text.startswith("--")
                         and "n" in a.text[1:]) for a in args)
    target_dir = None
    for i, a in enumerate(args):
        if a.text in ("-t", "--target-directory") and i + 1 < len(args):
            target_dir = args[i + 1]
        elif a.text.startswith("--target-directory="):
            target_dir = Arg(a.text.split("=", 1)[1], a.node, a.opaque)
    positional = positional_args(args, takes_value=takes)
    if target_dir is not None:
        sources, dest = positional, target_dir
        dest_is_dir = True
    elif len(positional) >= 2:
        sources, dest = positional[:-1], positional[-1]
        dest_is_dir = None
    else:
        w.add(UNKNOWN, f"{base} with unexpected arguments")
        return
    for src in sources:
        if base == "mv":
            path = w.resolve(src)
            if path is None:
                w.add(DESTRUCTIVE, f"mv moves paths known only at run time ({src.text})",
                      snapshot=w.cwd_snapshot())
            else:
                place = w.where(path)
                if place == "protected":
                    w.protected_hit(path)
                elif place == "outside":
                    w.add(DESTRUCTIVE, f"mv moves {path} away from outside the workspace")
        else:
            w.read(src)
    dest_path = w.resolve(dest)
    verb = "moves to" if base == "mv" else "copies to"
    if dest_path is None:
        w.add(DESTRUCTIVE, f"{base} writes to a path known only at run time ({dest.text})",
              snapshot=w.cwd_snapshot())
        return
    place = w.where(dest_path)
    if place == "protected":
        w.protected_hit(dest_path)
        return
    if place == "null":
        return
    if place == "outside":
        w.add(DESTRUCTIVE, f"{base} writes to {dest_path}, outside the workspace")
        return
    if dest_is_dir or os.path.isdir(dest_path):
        targets = []
        for src in sources:
            src_path = w.resolve(src)
            if src_path is None:
                targets.append(None)
            else:
                targets.append(os.path.join(dest_path, os.path.basename(src_path)))
    else:
        targets = [dest_path]
    for target in targets:
        if target is None:
            if no_clobber:
                w.add(WORKSPACE_WRITE, f"{base} {verb} {dest_path} without overwriting")
            else:
                w.add(DESTRUCTIVE, f"{base} may overwrite files in {dest_path}",
                      snapshot=[dest_path])
        elif exists(target) and not no_clobber:
            w.add(DESTRUCTIVE, f"{base} overwrites existing {target}", paths=[target])
        else:
            w.add(WORKSPACE_WRITE, f"{base} {verb} {target}")


@handles("ln")
def link(w: Walker, base: str, args: list[Arg]) -> None:
    force = any(a.text in ("-f", "--force") or (a.text.startswith("-") and
                                                 not a.text.startswith("--")
                                                 and "f" in a.text) for a in args)
    positional = positional_args(args, takes_value={"-t", "--target-directory", "-S", "--suffix"})
    if not positional:
        w.add(UNKNOWN, "ln with unexpected arguments")
        return
    if len(positional) == 1:
        link = Arg(os.path.basename(positional[0].text) or positional[0].text)
    else:
        link = positional[-1]
        path = w.resolve(link)
        if path and os.path.isdir(path) and not os.path.islink(path):
            link = Arg(os.path.join(path, os.path.basename(positional[0].text)))
    w.write(link, "truncate" if force else "create", "links")


@handles("mkdir", "touch", "mktemp")
def make(w: Walker, base: str, args: list[Arg]) -> None:
    positional = positional_args(args, takes_value={"-m", "--mode", "-t", "-d", "-r",
                                                    "--reference", "--suffix"})
    if base == "mktemp":
        w.add(WORKSPACE_WRITE, "mktemp creates a new temporary file")
        return
    if base == "touch":
        for a in positional:
            path = w.resolve(a)
            if path is not None and w.where(path) == "workspace" and exists(path):
                w.add(WORKSPACE_WRITE, f"touch updates the time stamp of {path}")
            else:
                w.write(a, "create", "creates")
        return
    for a in positional:
        w.write(a, "create", "creates")


@handles("chmod", "chown", "chgrp")
def permissions(w: Walker, base: str, args: list[Arg]) -> None:
    recursive = any(a.text in ("-R", "--recursive") or (a.text.startswith("-") and
                                                         not a.text.startswith("--")
                                                         and "R" in a.text) for a in args)
    positional = [a for a in args if not a.text.startswith("-") or
                  re.match(r"^-[rwxXst]+$", a.text)]
    if any(a.text.startswith("--reference") for a in args):
        targets = positional
    else:
        targets = positional[1:]
    if recursive:
        w.add(DESTRUCTIVE, f"{base} -R changes ownership or permissions recursively",
              snapshot=[p for p in (w.resolve(t) for t in targets)
                           if p and w.where(p) == "workspace"])
        for t in targets:
            w.read(t)
        return
    for t in targets:
        w.write(t, "modify-meta", f"{base} changes")


@handles("tee")
def tee(w: Walker, base: str, args: list[Arg]) -> None:
    append = any(a.text in ("-a", "--append") for a in args)
    for a in positional_args(args, takes_value={"--output-error"}):
        w.write(a, "append" if append else "truncate", "writes")
