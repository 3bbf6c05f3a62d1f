"""git: read subcommands, writes inside the workspace, and what discards history or working-tree
changes or rewrites a remote."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN, WORKSPACE_WRITE
from ..words import Arg
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


@handles("git")
def git(w: Walker, base: str, args: list[Arg]) -> None:
    i = 0
    cwd = w.ctx.cwd
    while i < len(args) and args[i].text.startswith("-"):
        text = args[i].text
        if text == "-C" and i + 1 < len(args):
            cwd = w.resolve(args[i + 1])
            i += 2
            continue
        if text in ("-c", "--config-env", "--exec-path") or text.startswith("--exec-path="):
            w.add(UNKNOWN, f"git {text} can make git run arbitrary programs")
            return
        if text in ("--git-dir", "--work-tree", "--namespace") and i + 1 < len(args):
            i += 2
            continue
        if text in ("--version", "--help"):
            return
        i += 1
    if i >= len(args):
        return
    sub = args[i].text
    rest = [a.text for a in args[i + 1:]]
    if cwd is not None and w.where(cwd) == "protected":
        w.protected_hit(cwd)
        return
    in_ws = cwd is not None and w.where(cwd) == "workspace"
    snap = [cwd] if in_ws else []

    def flag(*names: str) -> bool:
        return any(r in names or any(r.startswith(n + "=") for n in names if n.startswith("--"))
                   for r in rest)

    def short(letter: str) -> bool:
        return any(r.startswith("-") and not r.startswith("--") and letter in r[1:]
                   for r in rest)

    read_subs = {"status", "log", "diff", "show", "rev-parse", "ls-files", "ls-tree", "blame",
                 "describe", "shortlog", "cat-file", "show-ref", "whatchanged", "version",
                 "help", "grep", "count-objects", "check-ignore", "name-rev", "merge-base",
                 "rev-list", "for-each-ref", "ls-remote", "show-branch", "var", "annotate",
                 "range-diff", "verify-commit", "verify-tag", "cherry", "difftool"}
    if sub in read_subs:
        if flag("--output"):
            w.add(DESTRUCTIVE, f"git {sub} --output writes (overwrites) a file")
        return
    if sub == "branch":
        if flag("-D", "--delete", "-d") or short("D") or (short("d") and not flag("--list")):
            w.add(DESTRUCTIVE, "git branch -d/-D deletes a branch", snapshot=snap)
        elif flag("-f", "--force", "-M", "-C") or short("f"):
            w.add(DESTRUCTIVE, "git branch --force resets a branch", snapshot=snap)
        elif [r for r in rest if not r.startswith("-")] and not flag("--list", "-l",
                                                                      "--contains", "-a",
                                                                      "-r", "--merged",
                                                                      "--no-merged"):
            _git_write(w, in_ws, "git branch creates a branch")
        return
    if sub == "tag":
        if flag("-d", "--delete"):
            w.add(DESTRUCTIVE, "git tag -d deletes a tag", snapshot=snap)
        elif [r for r in rest if not r.startswith("-")] and not flag("-l", "--list"):
            _git_write(w, in_ws, "git tag creates a tag")
        return
    if sub == "stash":
        action = rest[0] if rest else "push"
        if action in ("list", "show"):
            return
        if action in ("drop", "clear"):
            w.add(DESTRUCTIVE, f"git stash {action} discards stashed changes", snapshot=snap)
        else:
            _git_write(w, in_ws, f"git stash {action} changes the working tree")
        return
    if sub == "remote":
        if not rest or rest[0] in ("-v", "show", "get-url", "--verbose"):
            return
        _git_write(w, in_ws, "git remote changes the repository configuration")
        return
    if sub == "config":
        if flag("--get", "--list", "-l", "--get-all", "--get-regexp", "--show-origin"):
            return
        if len([r for r in rest if not r.startswith("-")]) <= 1:
            return
        w.add(UNKNOWN, "git config changes configuration (aliases, hooks and pagers "
                          "can run programs)")
        return
    if sub == "worktree":
        if rest and rest[0] == "list":
            return
        if rest and rest[0] in ("remove", "prune"):
            w.add(DESTRUCTIVE, f"git worktree {rest[0]} deletes a working tree")
            return
        _git_write(w, in_ws, "git worktree changes working trees")
        return
    if sub == "reflog":
        if rest and rest[0] in ("expire", "delete"):
            w.add(DESTRUCTIVE, f"git reflog {rest[0]} discards history")
        return
    if sub == "clean":
        if flag("-n", "--dry-run") or (short("n") and not short("f")):
            return
        w.add(DESTRUCTIVE, "git clean deletes untracked files", snapshot=snap)
        return
    if sub == "reset":
        if flag("--hard", "--merge", "--keep"):
            w.add(DESTRUCTIVE, "git reset --hard discards uncommitted changes",
                  snapshot=snap)
        else:
            _git_write(w, in_ws, "git reset moves the branch or unstages changes")
        return
    if sub in ("checkout", "switch"):
        if "--" in rest or "." in rest or flag("-f", "--force", "--discard-changes") \
                or flag("--ours", "--theirs"):
            w.add(DESTRUCTIVE, f"git {sub} overwrites working-tree files", snapshot=snap)
        else:
            _git_write(w, in_ws, f"git {sub} changes the checked-out branch")
        return
    if sub == "restore":
        if flag("--staged", "-S") and not flag("--worktree", "-W"):
            _git_write(w, in_ws, "git restore --staged unstages changes")
        else:
            w.add(DESTRUCTIVE, "git restore discards working-tree changes", snapshot=snap)
        return
    if sub == "rm":
        if flag("--cached") and not flag("-f", "--force"):
            _git_write(w, in_ws, "git rm --cached untracks files")
        else:
            w.add(DESTRUCTIVE, "git rm deletes files", snapshot=snap)
        return
    if sub == "push":
        if flag("-f", "--force", "--force-with-lease", "--delete", "-d", "--mirror",
                "--prune") or short("f") or any(r.startswith("+") or r.startswith(":")
                                                for r in rest):
            w.add(DESTRUCTIVE, "git push --force/--delete rewrites or deletes remote "
                                  "history")
        else:
            w.add(UNKNOWN, "git push publishes commits to another machine")
        return
    if sub in ("gc", "prune", "filter-branch", "filter-repo", "update-ref", "replace"):
        if sub == "gc" and not flag("--prune") and not any(r.startswith("--prune=")
                                                            for r in rest):
            _git_write(w, in_ws, "git gc repacks the repository")
        else:
            w.add(DESTRUCTIVE, f"git {sub} can discard repository data")
        return
    if sub == "submodule":
        if rest and rest[0] in ("status", "summary"):
            return
        if rest and rest[0] == "deinit":
            w.add(DESTRUCTIVE, "git submodule deinit removes a submodule's files")
            return
        w.add(UNKNOWN, "git submodule can fetch and run other repositories' code")
        return
    if sub in ("add", "commit", "init", "clone", "fetch", "pull", "merge", "rebase", "mv",
               "cherry-pick", "revert", "apply", "am", "notes", "bisect", "sparse-checkout",
               "format-patch", "bundle", "archive", "mergetool", "maintenance", "lfs"):
        if sub == "clone":
            dests = [r for r in rest if not r.startswith("-")]
            if len(dests) >= 2:
                w.write(Arg(dests[-1]), "create", "git clone creates")
            else:
                _git_write(w, in_ws, "git clone creates a repository")
            return
        if sub == "apply" and flag("--check", "--stat", "--numstat", "--summary"):
            return
        _git_write(w, in_ws, f"git {sub} changes the repository")
        return
    w.add(UNKNOWN, f"git {sub}: effect not classified")


def _git_write(w: Walker, in_ws: bool, reason: str) -> None:
    if in_ws:
        w.add(WORKSPACE_WRITE, reason)
    else:
        w.add(DESTRUCTIVE, reason + " outside the workspace")
