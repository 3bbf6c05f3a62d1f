"""Law 1 path logic: where a resolved path lies (artoo's protected roots, the workspace, outside,
a null device), glob prefixes that may reach a protected root, and how a root can be spelled in a
command (`~/…`, `$HOME/…`)."""
from __future__ import annotations

import fnmatch
import glob as globmod
import os
import re

from protocol.settings import Settings

NULL_DEVICES = re.compile(r"^/dev/(null|zero|stdout|stderr|stdin|tty|fd/\d+|full|random|urandom)$"
                          r"|^/proc/self/fd/\d+$")
GLOB_CHARS = re.compile(r"[*?\[]")


def place(path: str, workspace: str, protected: tuple[str, ...]) -> str:
    """null / protected / workspace / outside for an absolute, resolved path."""
    if NULL_DEVICES.match(path):
        return "null"
    for root in protected:
        if within(path, root) or (GLOB_CHARS.search(path) and
                                  within(root, glob_base(path))
                                  and glob_may_match(path, root)):
            return "protected"
    if within(path, workspace):
        return "workspace"
    return "outside"


def protected_roots(settings: Settings) -> tuple[str, ...]:
    """artoo's own state: the data dir and the runtime dir (ipc sockets, pid files)."""
    roots = {os.path.realpath(settings.home), os.path.realpath(settings.run_dir)}
    return tuple(sorted(roots))


def spellings(root: str, home: str) -> list[str]:
    out = [root]
    if within(root, home) and root != home:
        rel = root[len(home.rstrip("/")) + 1:]
        out += [f"~/{rel}", f"$HOME/{rel}", f"${{HOME}}/{rel}"]
    return out


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+-")


def mentions_path(text: str, path: str) -> bool:
    """`path` appears in `text` as a whole path (so /tmp/rm1 is not found in /tmp/rm1ws/a).
    A plain search, not a regex per path: each new path would be compiled (~0.5 ms), and a
    forked effector starts with none of the zygote's compiled patterns."""
    path = path.rstrip("/")
    at = text.find(path)
    while at >= 0:
        end = at + len(path)
        if end >= len(text) or text[end] not in _NAME_CHARS:
            return True
        at = text.find(path, at + 1)
    return False


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def glob_base(path: str) -> str:
    m = GLOB_CHARS.search(path)
    return os.path.dirname(path[: m.start()]) if m else path


def glob_may_match(pattern: str, root: str) -> bool:
    """Could a glob such as /home/u/.a* expand to (something inside) the protected root?"""
    parts_p = pattern.rstrip("/").split("/")
    parts_r = root.rstrip("/").split("/")
    for p, r in zip(parts_p, parts_r):
        if r.startswith(".") and not p.startswith("."):
            return False                      # bash globs skip dot files (dotglob is off)
        if not fnmatch.fnmatchcase(r, p):
            return False
    return True


def exists(path: str) -> bool:
    if GLOB_CHARS.search(path):
        return bool(globmod.glob(path))
    return os.path.lexists(path)


def looks_like_path(text: str) -> bool:
    return "/" in text or text.startswith("~") or text.startswith(".") or "$" in text
