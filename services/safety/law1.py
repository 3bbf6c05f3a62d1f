"""Law 1 (seeds/000 §8, DESIGN §9): never harm the user's environment without explicit approval.

Three parts:

* `classify(command)` parses a shell command with bashlex (pipelines, lists, subshells, compound
  commands, functions, command and process substitution, redirections, `bash -c` / `eval` strings,
  `xargs`, `find -exec`, `sudo`/`env`/`timeout` wrappers) and puts it into one tier, with a reason:
  read-only < workspace-write < unknown < destructive. It classifies by *effect*: paths are expanded
  (`~`, `$HOME`, `$PWD`), resolved against the working directory and checked against the workspace,
  so `rm`, `/bin/rm`, `\\rm`, `r""m`, `xargs -0 rm`, `find -delete` and `$(rm …)` are all deletions,
  and `>` onto an existing file is an overwrite. Anything it cannot resolve (unknown programs, code
  run by interpreters, commands built from variables, unparseable text) is `unknown`: it fails
  closed. A command that touches artoo's own data dir is `protected`: refused, never approvable.
* `ApprovalGate` asks the operator, over the bus, to approve one specific action (ApprovalRequest →
  ApprovalDecision). `--yes` pre-approves; no operator or no answer in time means deny.
* `UndoStore` keeps a copy of what an approved action deletes or overwrites inside the workspace
  under `<data dir>/undo/<run_id>/`, so `artoo undo RUN_ID` can put it back.
"""
from __future__ import annotations

import glob as globmod
import json
import logging
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import bashlex

from protocol.messages import ApprovalDecision, ApprovalRequest, SubTask
from protocol.settings import Settings

from services.runtime import tasklog

log = logging.getLogger("artoo.law1")

READ_ONLY = "read-only"
WORKSPACE_WRITE = "workspace-write"
UNKNOWN = "unknown"
DESTRUCTIVE = "destructive"
_RANK = {READ_ONLY: 0, WORKSPACE_WRITE: 1, UNKNOWN: 2, DESTRUCTIVE: 3}
GATED = (UNKNOWN, DESTRUCTIVE)
LAW1 = "[LAW1]"


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------

@dataclass
class Finding:
    level: str
    reason: str
    paths: tuple[str, ...] = ()          # workspace paths deleted/overwritten: undo candidates
    snapshot: tuple[str, ...] = ()       # workspace dirs changed in ways we cannot enumerate
    protected: bool = False


@dataclass
class Classification:
    command: str
    level: str
    reason: str
    findings: list[Finding] = field(default_factory=list)
    protected: bool = False

    @property
    def needs_approval(self) -> bool:
        return self.level in GATED and not self.protected

    @property
    def paths(self) -> list[str]:
        return _dedup(p for f in self.findings for p in f.paths)

    @property
    def snapshot_roots(self) -> list[str]:
        return _dedup(p for f in self.findings for p in f.snapshot)

    def to_dict(self) -> dict:
        return {"command": self.command, "classification": self.level, "reason": self.reason,
                "needs_approval": self.needs_approval, "protected": self.protected,
                "paths": self.paths, "snapshot_roots": self.snapshot_roots,
                "findings": [{"level": f.level, "reason": f.reason, "paths": list(f.paths)}
                             for f in self.findings]}


def _dedup(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


# ---------------------------------------------------------------------------------------------
# command tables
# ---------------------------------------------------------------------------------------------

# Programs that only read (their file arguments are still checked against the data dir).
_READ_ONLY = frozenset("""
cat tac nl head tail less more most wc grep egrep fgrep rg ag ack ls dir vdir tree stat file du df
pwd whoami id groups uname arch cal date uptime free ps pgrep pidof top htop which whereis type
realpath readlink basename dirname seq sleep true false test [ echo printf expr bc dc jq yq xmllint cut tr
paste join fold fmt column expand unexpand rev shuf comm diff diff3 cmp sdiff md5sum sha1sum
sha224sum sha256sum sha384sum sha512sum b2sum cksum sum base32 base64 xxd od hexdump strings
printenv locale getconf nproc lscpu lsblk lsusb lspci lsmod lsof ss netstat ping dig nslookup host
traceroute tracepath whois zcat zgrep zless zmore bzcat xzcat zstdcat lz4cat man help info apropos
whatis last lastlog w who users tty getent locate plocate mlocate mdfind fd fdfind file look
numfmt factor iostat vmstat mpstat sensors nvidia-smi lshw dmidecode hwinfo inxi neofetch tput
: cd pushd popd dirs export unset set shopt alias unalias read getopts shift wait jobs hash return
exit break continue let local declare typeset readonly umask ulimit history times caller
""".split())
_SHELLS = re.compile(r"^(ba|da|z|k|mk|c|tc|fi|a|po)?sh$|^busybox$")
_INTERPRETERS = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|ipython[0-9.]*|perl[0-9.]*|ruby[0-9.]*|irb|node(js)?|deno|bun|"
    r"php[0-9.]*|lua[0-9.]*|luajit|rscript|r|julia|java|jshell|osascript|pwsh|powershell|tclsh|"
    r"wish|expect|groovy|scala|kotlin|swift|go|cargo|rustc|gcc|cc|clang|g\+\+|make|cmake|ninja|"
    r"npx|pnpx|uvx|uv|poetry|pipx|gradle|mvn|ant|sbt|dotnet|erl|elixir|iex|guile|racket|sbcl|"
    r"ghc|runghc|stack|ocaml|nim|zig|v|crystal|dart|flutter|php-cgi|awk-script)$", re.I)
_VERSION_FLAGS = frozenset({"--version", "-V", "-v", "--help", "-h", "version", "-version"})
_FORMATTERS = re.compile(r"^(mkfs(\..+)?|mke2fs|mkswap|mkdosfs|mkntfs|fdisk|sfdisk|cfdisk|parted|"
                         r"gdisk|sgdisk|wipefs|blkdiscard|badblocks|zpool|lvremove|vgremove|"
                         r"pvremove|"
                         r"cryptsetup|format)$")
_DELETERS = frozenset({"rm", "rmdir", "unlink", "shred", "srm", "wipe", "trash", "trash-put",
                       "gio"})
_KILLERS = frozenset({"kill", "pkill", "killall", "skill", "xkill", "killall5"})
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff", "init", "telinit", "systemd-run"})
_SYSTEM = frozenset({"mount", "umount", "swapon", "swapoff", "losetup", "modprobe", "rmmod",
                     "insmod", "iptables", "ip6tables", "nft", "ufw", "firewall-cmd", "useradd",
                     "userdel", "usermod", "groupadd", "groupdel", "groupmod", "passwd", "chpasswd",
                     "visudo", "update-alternatives", "ldconfig", "hwclock", "setfacl", "chattr",
                     "chroot", "mknod", "mkfifo", "sysctl", "timedatectl", "hostnamectl",
                     "localectl", "loginctl", "nmcli", "route", "ifconfig", "ifup", "ifdown",
                     "dpkg", "rpm", "update-grub", "grub-install", "efibootmgr", "setenforce",
                     "launchctl", "defaults", "diskutil", "tmutil", "csrutil", "scutil", "at",
                     "batch", "atrm"})
_SENDERS = frozenset({"ssh", "scp", "sftp", "nc", "ncat", "netcat", "socat", "telnet", "ftp",
                      "lftp", "mail", "mailx", "sendmail", "mutt", "msmtp", "rclone", "aws",
                      "gsutil", "az", "gcloud", "s3cmd", "gh", "hub", "glab", "twine"})
_INTERACTIVE = frozenset({"vi", "vim", "nvim", "nano", "emacs", "ed", "ex", "pico", "joe", "mcedit",
                          "tmux", "screen", "open", "xdg-open", "code", "subl"})
_PACKAGE_MANAGERS = frozenset({"apt", "apt-get", "aptitude", "yum", "dnf", "zypper", "pacman",
                               "apk", "brew", "port", "snap", "flatpak", "pip", "pip3", "npm",
                               "yarn", "pnpm", "cargo-install", "gem", "conda", "mamba",
                               "micromamba",
                               "nix-env", "pipenv", "composer", "bundle", "go-get"})
_PM_READ = frozenset({"list", "ls", "show", "info", "search", "freeze", "check", "view", "outdated",
                      "config", "--version", "-v", "-V", "version", "help", "--help", "doctor",
                      "why", "explain", "audit", "policy", "madison", "depends", "rdepends",
                      "query", "-Q", "-Qi", "-Ql", "-Ss", "-Si", "whatprovides", "leaves", "deps",
                      "env", "inspect", "download-info", "cache-list", "list-installed"})
_PM_REMOVE = frozenset({"remove", "uninstall", "purge", "autoremove", "erase", "rm", "-R", "-Rs",
                        "-Rns", "clean", "prune", "unlink", "cleanup", "-r", "delete"})
_CONTAINER_READ = frozenset({"ps", "images", "image", "inspect", "logs", "version", "info", "top",
                             "stats", "port", "history", "diff", "search", "get", "describe",
                             "explain", "api-resources", "cluster-info", "events", "ls", "list"})
_CONTAINER_DESTROY = frozenset({"rm", "rmi", "prune", "kill", "stop", "down", "delete", "drain",
                                "destroy", "system", "volume", "network", "scale", "rollout"})
_DANGEROUS_VARS = frozenset({"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV",
                             "ENV", "PROMPT_COMMAND", "IFS", "SHELLOPTS", "BASHOPTS", "PS4",
                             "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER",
                             "PAGER", "EDITOR", "VISUAL", "PYTHONSTARTUP", "PERL5OPT",
                             "NODE_OPTIONS", "PYTHONPATH"})
_NULL_DEVICES = re.compile(r"^/dev/(null|zero|stdout|stderr|stdin|tty|fd/\d+|full|random|urandom)$"
                           r"|^/proc/self/fd/\d+$")
_GLOB_CHARS = re.compile(r"[*?\[]")
_TIME_KEYWORD = re.compile(r"(^|[;&|(){}]\s*|\n\s*)time(\s+-p)?\s+")
_VAR = re.compile(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z_0-9]*|[0-9@*#?$!-])")


@dataclass
class _Arg:
    text: str
    node: object = None                   # bashlex word node, when there is one
    opaque: bool = False                  # value only known at run time (xargs input, `{}`)


@dataclass
class _Ctx:
    workspace: str
    protected: tuple[str, ...]
    home: str
    cwd: Optional[str]
    env: dict[str, str]
    depth: int = 0


class _Walker:
    """Walks one parsed command and collects findings."""

    def __init__(self, ctx: _Ctx):
        self.ctx = ctx
        self.findings: list[Finding] = []
        self.functions: set[str] = set()

    # -- findings -----------------------------------------------------------------------------
    def add(self, level: str, reason: str, paths: Iterable[str] = (), snapshot: Iterable[str] = (),
            protected: bool = False) -> None:
        self.findings.append(Finding(level, reason, tuple(paths), tuple(snapshot), protected))

    def protected_hit(self, path: str) -> None:
        self.add(DESTRUCTIVE, f"touches artoo's data dir ({path}); agent tools may never read "
                              f"or write it", protected=True)

    # -- paths --------------------------------------------------------------------------------
    def resolve(self, arg: _Arg) -> Optional[str]:
        """The absolute path an argument names, or None when only known at run time."""
        if arg.opaque or "{}" in arg.text:
            return None
        node = arg.node
        if node is not None and any(p.kind in ("commandsubstitution", "processsubstitution")
                                    for p in _word_parts(node)):
            return None
        text = arg.text
        if text.startswith("~"):
            head, sep, rest = text.partition("/")
            if head != "~":
                return None                      # ~user: another user's home
            text = self.ctx.home + (sep + rest if sep else "")

        def expand(m: re.Match) -> str:
            name = m.group(1).strip("{}")
            if name in self.ctx.env:
                return self.ctx.env[name]
            if name == "PWD" and self.ctx.cwd:
                return self.ctx.cwd
            raise KeyError(name)

        if "$" in text:
            try:
                text = _VAR.sub(expand, text)
            except KeyError:
                return None
        if not text:
            return None
        if not os.path.isabs(text):
            if self.ctx.cwd is None:
                return None
            text = os.path.join(self.ctx.cwd, text)
        text = os.path.normpath(text)
        if _NULL_DEVICES.match(text):
            return text
        return os.path.realpath(text)

    def where(self, path: str) -> str:
        if _NULL_DEVICES.match(path):
            return "null"
        for root in self.ctx.protected:
            if _within(path, root) or (_GLOB_CHARS.search(path) and
                                       _within(root, _glob_base(path))
                                       and _glob_may_match(path, root)):
                return "protected"
        if _within(path, self.ctx.workspace):
            return "workspace"
        return "outside"

    def read(self, arg: _Arg) -> None:
        path = self.resolve(arg)
        if path is not None and self.where(path) == "protected":
            self.protected_hit(path)

    def write(self, arg: _Arg, mode: str, what: str) -> None:
        """mode: truncate (existing content lost) / append / create (new entry) / modify."""
        path = self.resolve(arg)
        if path is None:
            level = DESTRUCTIVE if mode in ("truncate", "modify") else UNKNOWN
            self.add(level, f"{what} a path known only at run time ({arg.text})",
                     snapshot=self._cwd_snapshot())
            return
        place = self.where(path)
        if place == "null":
            return
        if place == "protected":
            self.protected_hit(path)
        elif place == "outside":
            self.add(DESTRUCTIVE, f"{what} {path}, outside the workspace")
        elif mode in ("truncate", "modify") and _exists(path):
            verb = "overwrites" if mode == "truncate" else "modifies"
            self.add(DESTRUCTIVE, f"{verb} existing {path}", paths=[path])
        else:
            self.add(WORKSPACE_WRITE, f"{what} {path}")

    def delete(self, arg: _Arg, what: str = "deletes") -> None:
        path = self.resolve(arg)
        if path is None:
            self.add(DESTRUCTIVE, f"{what} paths known only at run time ({arg.text})",
                     snapshot=self._cwd_snapshot())
            return
        place = self.where(path)
        if place == "protected":
            self.protected_hit(path)
        elif place == "outside":
            self.add(DESTRUCTIVE, f"{what} {path}, outside the workspace")
        else:
            self.add(DESTRUCTIVE, f"{what} {path}", paths=[path])

    def _cwd_snapshot(self) -> list[str]:
        cwd = self.ctx.cwd
        return [cwd] if cwd and self.where(cwd) == "workspace" else []

    # -- AST walk -----------------------------------------------------------------------------
    def visit(self, node) -> None:
        kind = node.kind
        if kind == "command":
            self.command_node(node)
        elif kind in ("list", "pipeline"):
            for part in node.parts:
                if part.kind not in ("operator", "pipe"):
                    self.visit(part)
        elif kind == "compound":
            saved = self.ctx.cwd
            for part in node.list:
                if part.kind != "reservedword":
                    self.visit(part)
            if node.list and getattr(node.list[0], "word", "") == "(":
                self.ctx.cwd = saved          # a subshell's cd does not leak out
            for redirect in getattr(node, "redirects", []) or []:
                self.redirect(redirect)
        elif kind in ("if", "for", "while", "until"):
            for part in node.parts:
                if part.kind == "word":
                    self.substitutions(part)
                elif part.kind != "reservedword":
                    self.visit(part)
            for redirect in getattr(node, "redirects", []) or []:
                self.redirect(redirect)
        elif kind == "function":
            self.functions.add(node.name.word if hasattr(node, "name") else node.parts[0].word)
            self.visit(node.body if hasattr(node, "body") else node.parts[-1])
        elif kind == "redirect":
            self.redirect(node)
        elif kind in ("word", "assignment"):
            self.substitutions(node)
        elif kind in ("operator", "pipe", "reservedword", "heredoc", "tilde", "parameter"):
            return
        else:
            self.add(UNKNOWN, f"unsupported shell construct ({kind})")

    def substitutions(self, node) -> None:
        """Visit the commands hidden in $(…), `…`, <(…) and >(…) inside a word."""
        for part in _word_parts(node):
            if part.kind in ("commandsubstitution", "processsubstitution"):
                self.visit(part.command)

    def redirect(self, node) -> None:
        target = node.output
        rtype = node.type
        if isinstance(target, int) or target is None:
            return                             # fd duplication (2>&1, >&2)
        self.substitutions(target)
        if any(p.kind == "processsubstitution" for p in _word_parts(target)):
            return
        arg = _Arg(target.word, target)
        if rtype in ("<", "<<<", "<&"):
            self.read(arg)
        elif rtype in ("<<", "<<-"):
            return
        elif rtype == ">>":
            self.write(arg, "append", "appends to")
        elif rtype == "<>":
            self.write(arg, "modify", "opens for writing")
        else:                                  # > >| &> >&
            self.write(arg, "truncate", "writes")

    def command_node(self, node) -> None:
        words: list[_Arg] = []
        assignments = []
        for part in node.parts:
            if part.kind == "word":
                self.substitutions(part)
                words.append(_Arg(part.word, part))
            elif part.kind == "assignment":
                self.substitutions(part)
                assignments.append(part.word)
            elif part.kind == "redirect":
                self.redirect(part)
        for assignment in assignments:
            name = assignment.split("=", 1)[0].rstrip("+")
            if name in _DANGEROUS_VARS:
                self.add(UNKNOWN, f"sets {name}, which changes what later commands run")
        if words:
            self.run(words)

    # -- one simple command -------------------------------------------------------------------
    def run(self, words: list[_Arg]) -> None:
        head = words[0]
        if head.opaque or (head.node is not None and any(
                p.kind in ("parameter", "commandsubstitution", "processsubstitution")
                for p in _word_parts(head.node))) or "$" in head.text:
            self.add(UNKNOWN, f"the program to run ({head.text}) is only known at run time")
            return
        name = head.text
        base = os.path.basename(name) if "/" in name else name
        args = words[1:]
        if "/" in name and not name.startswith("/"):
            self.add(UNKNOWN, f"runs the program {name}; its effect cannot be classified")
            return
        if name in self.functions:
            return                              # its body was classified where it was defined
        handler = _HANDLERS.get(base)
        if handler is not None:
            handler(self, base, args)
        elif _SHELLS.match(base):
            self.shell(base, args)
        elif _FORMATTERS.match(base):
            self.add(DESTRUCTIVE, f"{base} formats, partitions or wipes storage")
        elif base in _DELETERS:
            self.rm(base, args)
        elif base in _KILLERS:
            if any(a.text in ("-l", "-L", "--list", "-0") for a in args):
                return
            self.add(DESTRUCTIVE, f"{base} terminates processes")
        elif base in _POWER:
            self.add(DESTRUCTIVE, f"{base} changes the machine's power or init state")
        elif base in _SYSTEM:
            self.system(base, args)
        elif base in _SENDERS:
            self.add(UNKNOWN, f"{base} sends data to or acts on another machine")
        elif base in _INTERACTIVE:
            self.add(UNKNOWN, f"{base} is interactive or opens other programs")
        elif base in _PACKAGE_MANAGERS:
            self.package_manager(base, args)
        elif _INTERPRETERS.match(base):
            self.interpreter(base, args)
        elif base in _READ_ONLY:
            self.read_only(base, args)
        else:
            self.add(UNKNOWN, f"unrecognised program {base}: its effect cannot be classified")

    def read_only(self, base: str, args: list[_Arg]) -> None:
        if base in ("cd", "pushd"):
            target = next((a for a in args if not a.text.startswith("-")), None)
            if target is None:
                self.ctx.cwd = self.ctx.home
            elif target.text == "-":
                self.ctx.cwd = None
            else:
                path = self.resolve(target)
                if path is not None and self.where(path) == "protected":
                    self.protected_hit(path)
                self.ctx.cwd = path
            return
        if base == "popd":
            self.ctx.cwd = None
            return
        if base in ("echo", "printf", "test", "[", "seq", "sleep", "expr", "export", "set",
                    "local", "declare", "typeset", "readonly", "alias", "let", "read"):
            if base in ("export", "declare", "typeset", "local", "readonly"):
                for a in args:
                    if a.text.split("=", 1)[0] in _DANGEROUS_VARS and "=" in a.text:
                        self.add(UNKNOWN, f"sets {a.text.split('=', 1)[0]}, which changes what "
                                          f"later commands run")
            return
        if base == "date" and any(a.text in ("-s", "--set") or a.text.startswith("--set=")
                                  for a in args):
            self.add(DESTRUCTIVE, "date --set changes the system clock")
            return
        if base == "history" and any(a.text in ("-c", "-d", "-w") for a in args):
            return
        if base == "dmesg" and any(a.text in ("-c", "-C", "--clear", "--read-clear", "-D", "-E")
                                   for a in args):
            self.add(DESTRUCTIVE, "dmesg --clear erases the kernel log")
            return
        if base == "top" and not any(a.text.startswith("-b") for a in args):
            return
        for a in args:
            if not a.text.startswith("-") and _looks_like_path(a.text):
                self.read(a)

    # -- handlers for specific programs -------------------------------------------------------
    def rm(self, base: str, args: list[_Arg]) -> None:
        if base == "gio" and (not args or args[0].text not in ("trash", "remove", "rm")):
            self.add(UNKNOWN, "gio: effect cannot be classified")
            return
        targets = _positional(args)
        if base == "gio":
            targets = targets[1:]
        if not targets:
            self.add(DESTRUCTIVE, f"{base} deletes files")
            return
        for target in targets:
            self.delete(target, "shreds" if base in ("shred", "srm", "wipe") else "deletes")

    def truncate(self, base: str, args: list[_Arg]) -> None:
        targets = _positional(args, takes_value={"-s", "--size", "-r", "--reference", "-o"})
        if not targets:
            self.add(DESTRUCTIVE, "truncate changes file sizes")
        for target in targets:
            self.delete(target, "truncates")

    def dd(self, base: str, args: list[_Arg]) -> None:
        for a in args:
            if a.text.startswith("of="):
                target = _Arg(a.text[3:], a.node, a.opaque)
                path = self.resolve(target)
                if path is not None and self.where(path) == "protected":
                    self.protected_hit(path)
                elif path is None or self.where(path) != "null":
                    paths = [path] if path and self.where(path) == "workspace" and _exists(path) \
                        else []
                    self.add(DESTRUCTIVE, f"dd writes raw data to {target.text}", paths=paths)
            elif a.text.startswith("if="):
                self.read(_Arg(a.text[3:], a.node, a.opaque))

    def copy_move(self, base: str, args: list[_Arg]) -> None:
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
                target_dir = _Arg(a.text.split("=", 1)[1], a.node, a.opaque)
        positional = _positional(args, takes_value=takes)
        if target_dir is not None:
            sources, dest = positional, target_dir
            dest_is_dir = True
        elif len(positional) >= 2:
            sources, dest = positional[:-1], positional[-1]
            dest_is_dir = None
        else:
            self.add(UNKNOWN, f"{base} with unexpected arguments")
            return
        for src in sources:
            if base == "mv":
                path = self.resolve(src)
                if path is None:
                    self.add(DESTRUCTIVE, f"mv moves paths known only at run time ({src.text})",
                             snapshot=self._cwd_snapshot())
                else:
                    place = self.where(path)
                    if place == "protected":
                        self.protected_hit(path)
                    elif place == "outside":
                        self.add(DESTRUCTIVE, f"mv moves {path} away from outside the workspace")
            else:
                self.read(src)
        dest_path = self.resolve(dest)
        verb = "moves to" if base == "mv" else "copies to"
        if dest_path is None:
            self.add(DESTRUCTIVE, f"{base} writes to a path known only at run time ({dest.text})",
                     snapshot=self._cwd_snapshot())
            return
        place = self.where(dest_path)
        if place == "protected":
            self.protected_hit(dest_path)
            return
        if place == "null":
            return
        if place == "outside":
            self.add(DESTRUCTIVE, f"{base} writes to {dest_path}, outside the workspace")
            return
        if dest_is_dir or os.path.isdir(dest_path):
            targets = []
            for src in sources:
                src_path = self.resolve(src)
                if src_path is None:
                    targets.append(None)
                else:
                    targets.append(os.path.join(dest_path, os.path.basename(src_path)))
        else:
            targets = [dest_path]
        for target in targets:
            if target is None:
                if no_clobber:
                    self.add(WORKSPACE_WRITE, f"{base} {verb} {dest_path} without overwriting")
                else:
                    self.add(DESTRUCTIVE, f"{base} may overwrite files in {dest_path}",
                             snapshot=[dest_path])
            elif _exists(target) and not no_clobber:
                self.add(DESTRUCTIVE, f"{base} overwrites existing {target}", paths=[target])
            else:
                self.add(WORKSPACE_WRITE, f"{base} {verb} {target}")

    def link(self, base: str, args: list[_Arg]) -> None:
        force = any(a.text in ("-f", "--force") or (a.text.startswith("-") and
                                                     not a.text.startswith("--")
                                                     and "f" in a.text) for a in args)
        positional = _positional(args, takes_value={"-t", "--target-directory", "-S", "--suffix"})
        if not positional:
            self.add(UNKNOWN, "ln with unexpected arguments")
            return
        if len(positional) == 1:
            link = _Arg(os.path.basename(positional[0].text) or positional[0].text)
        else:
            link = positional[-1]
            path = self.resolve(link)
            if path and os.path.isdir(path) and not os.path.islink(path):
                link = _Arg(os.path.join(path, os.path.basename(positional[0].text)))
        self.write(link, "truncate" if force else "create", "links")

    def make(self, base: str, args: list[_Arg]) -> None:
        positional = _positional(args, takes_value={"-m", "--mode", "-t", "-d", "-r",
                                                    "--reference", "--suffix"})
        if base == "mktemp":
            self.add(WORKSPACE_WRITE, "mktemp creates a new temporary file")
            return
        if base == "touch":
            for a in positional:
                path = self.resolve(a)
                if path is not None and self.where(path) == "workspace" and _exists(path):
                    self.add(WORKSPACE_WRITE, f"touch updates the time stamp of {path}")
                else:
                    self.write(a, "create", "creates")
            return
        for a in positional:
            self.write(a, "create", "creates")

    def permissions(self, base: str, args: list[_Arg]) -> None:
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
            self.add(DESTRUCTIVE, f"{base} -R changes ownership or permissions recursively",
                     snapshot=[p for p in (self.resolve(t) for t in targets)
                               if p and self.where(p) == "workspace"])
            for t in targets:
                self.read(t)
            return
        for t in targets:
            self.write(t, "modify-meta", f"{base} changes")

    def tee(self, base: str, args: list[_Arg]) -> None:
        append = any(a.text in ("-a", "--append") for a in args)
        for a in _positional(args, takes_value={"--output-error"}):
            self.write(a, "append" if append else "truncate", "writes")

    def sort(self, base: str, args: list[_Arg]) -> None:
        for i, a in enumerate(args):
            if a.text in ("-o", "--output") and i + 1 < len(args):
                self.write(args[i + 1], "truncate", "writes")
            elif a.text.startswith("--output="):
                self.write(_Arg(a.text.split("=", 1)[1], a.node), "truncate", "writes")
            elif a.text.startswith("-o") and len(a.text) > 2 and not a.text.startswith("--"):
                self.write(_Arg(a.text[2:], a.node), "truncate", "writes")
            elif not a.text.startswith("-"):
                self.read(a)

    def uniq(self, base: str, args: list[_Arg]) -> None:
        positional = _positional(args, takes_value={"-f", "-s", "-w", "--skip-fields",
                                                    "--skip-chars", "--check-chars"})
        if positional:
            self.read(positional[0])
        if len(positional) >= 2:
            self.write(positional[1], "truncate", "writes")

    def sed(self, base: str, args: list[_Arg]) -> None:
        in_place = any(a.text.startswith("--in-place") or (a.text.startswith("-") and
                                                          not a.text.startswith("--")
                                                          and ("i" in a.text[1:] or
                                                               "I" in a.text[1:]))
                       for a in args)
        scripts: list[str] = []
        files: list[_Arg] = []
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
                self.read(args[i + 1])
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
                self.write(f, "modify", "edits in place")
            if not files:
                self.add(DESTRUCTIVE, "sed -i edits files in place")
            return
        for s in scripts:
            if re.search(r"(^|[;}\n]|[0-9$/]\s*)\s*[wWe]\b|/[gpiImMe0-9]*[we](\s|$)", s):
                self.add(UNKNOWN, "the sed script writes files or runs commands (w/e)")
        for f in files:
            self.read(f)

    def awk(self, base: str, args: list[_Arg]) -> None:
        program = None
        files: list[_Arg] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a.text in ("-f", "--file", "-v", "-F", "--assign", "--field-separator") \
                    and i + 1 < len(args):
                if a.text in ("-f", "--file"):
                    self.add(UNKNOWN, f"{base} runs a program file")
                    program = ""
                i += 2
                continue
            if a.text in ("-i", "--include") or a.text.startswith("-i"):
                self.add(DESTRUCTIVE, f"{base} -i inplace edits files")
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
            self.add(UNKNOWN, f"the {base} program writes files or runs commands")
        for f in files:
            if "=" not in f.text:
                self.read(f)

    def find(self, base: str, args: list[_Arg]) -> None:
        roots: list[_Arg] = []
        i = 0
        while i < len(args) and not (args[i].text.startswith("-") or args[i].text in ("(", "!",
                                                                                    ")")):
            roots.append(args[i])
            i += 1
        root_paths = [p for p in (self.resolve(r) for r in roots) if p] if roots else \
            ([self.ctx.cwd] if self.ctx.cwd else [])
        snap = [p for p in root_paths if self.where(p) == "workspace"]
        for r in roots:
            self.read(r)
        outside = [p for p in root_paths if self.where(p) == "outside"]
        where = ", ".join(root_paths) or "paths known only at run time"
        while i < len(args):
            text = args[i].text
            if text == "-delete":
                self.add(DESTRUCTIVE, f"find -delete removes files under {where}",
                         snapshot=[] if outside else snap)
            elif text in ("-exec", "-execdir", "-ok", "-okdir"):
                inner: list[_Arg] = []
                i += 1
                while i < len(args) and args[i].text not in (";", "+", "\\;"):
                    inner.append(args[i])
                    i += 1
                if not inner:
                    self.add(UNKNOWN, f"find {text} without a command")
                else:
                    before = len(self.findings)
                    self.run(inner)
                    for f in self.findings[before:]:
                        if f.level == DESTRUCTIVE and not f.snapshot and not outside:
                            f.snapshot = tuple(snap)
                        f.reason = f"find {text}: {f.reason}"
            elif text in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(args):
                self.write(args[i + 1], "truncate", "writes")
                i += 1
            i += 1

    def xargs(self, base: str, args: list[_Arg]) -> None:
        takes = {"-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-L", "-l", "-n",
                 "--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"}
        i = 0
        while i < len(args):
            text = args[i].text
            if text in ("-a", "--arg-file") and i + 1 < len(args):
                self.read(args[i + 1])
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
        self.run(inner + [_Arg("<input>", opaque=True)])

    def wrapper(self, base: str, args: list[_Arg]) -> None:
        """Programs that run another program: classify that one."""
        takes = {
            "sudo": {"-u", "-g", "-C", "-h", "-p", "-r", "-t", "-U", "-D", "--user", "--group"},
            "doas": {"-u", "-C"},
            "nice": {"-n", "--adjustment"}, "ionice": {"-c", "-n", "-p", "--class"},
            "timeout": {"-s", "--signal", "-k", "--kill-after"}, "time": {"-f", "-o"},
            "stdbuf": {"-i", "-o", "-e"}, "chrt": set(), "taskset": set(), "env": {"-u", "-C",
                                                                                 "--unset",
                                                                                 "--chdir"},
            "command": set(), "builtin": set(), "exec": {"-a"}, "nohup": set(), "setsid": set(),
            "strace": {"-e", "-o", "-p", "-s"}, "ltrace": {"-e", "-o"}, "unbuffer": set(),
            "caffeinate": set(), "flock": {"-w", "-E", "--timeout"}, "watch": {"-n", "-d"},
            "firejail": set(), "proxychains": set(), "torsocks": set(), "catchsegv": set(),
            "valgrind": set(), "faketime": set(), "xvfb-run": set(), "dbus-run-session": set(),
        }.get(base, set())
        i = 0
        while i < len(args):
            text = args[i].text
            if base == "env" and "=" in text and not text.startswith("-"):
                name = text.split("=", 1)[0]
                if name in _DANGEROUS_VARS:
                    self.add(UNKNOWN, f"sets {name}, which changes what the command runs")
                i += 1
                continue
            if base == "env" and (text.startswith("-S") or text.startswith("--split-string")):
                self.add(UNKNOWN, "env -S runs a command built from a string")
                return
            if base in ("sudo", "doas") and text in ("-s", "-i", "--shell", "--login", "-e",
                                                     "--edit"):
                self.add(DESTRUCTIVE, f"{base} {text} opens a root shell or editor")
                return
            if base == "command" and text in ("-v", "-V"):
                return
            if text == "--":
                i += 1
                break
            if text in takes:
                i += 2
                continue
            if text.startswith("-"):
                i += 1
                continue
            if base == "timeout" and re.match(r"^[0-9.]+[smhd]?$", text):
                i += 1
                break
            if base in ("chrt", "taskset", "flock") and i == 0:
                i += 1
                continue
            break
        inner = args[i:]
        if base == "timeout" and inner and re.match(r"^[0-9.]+[smhd]?$", inner[0].text):
            inner = inner[1:]
        if not inner:
            if base in ("sudo", "doas"):
                self.add(UNKNOWN, f"{base} without a command")
            return                               # `env` alone prints; `exec` alone redirects
        if base == "watch":
            self.shell_string(" ".join(a.text for a in inner), f"{base}: ")
            return
        before = len(self.findings)
        self.run(inner)
        if base in ("sudo", "doas"):
            self.add(UNKNOWN, f"{base} runs {inner[0].text} as another user (root)")
            for f in self.findings[before:]:
                f.reason = f"{base}: {f.reason}"

    def shell(self, base: str, args: list[_Arg]) -> None:
        if base == "busybox":
            if args:
                self.run(args)
            return
        if args and all(a.text in _VERSION_FLAGS for a in args):
            return
        for i, a in enumerate(args):
            if a.text == "-c" or (a.text.startswith("-") and not a.text.startswith("--")
                                  and a.text.endswith("c")):
                if i + 1 >= len(args):
                    self.add(UNKNOWN, f"{base} -c without a command")
                    return
                script = args[i + 1]
                if script.node is not None and any(p.kind != "tilde"
                                                   for p in _word_parts(script.node)):
                    self.add(UNKNOWN, f"{base} -c runs a command built at run time")
                    return
                self.shell_string(script.text, f"{base} -c: ")
                return
            if a.text.startswith("-") or a.text.startswith("+"):
                continue
            self.add(UNKNOWN, f"{base} runs the script {a.text}; its content is not checked")
            return
        self.add(UNKNOWN, f"{base} runs commands from its input")

    def shell_string(self, script: str, prefix: str) -> None:
        if self.ctx.depth >= 4:
            self.add(UNKNOWN, "shell code nested too deeply to classify")
            return
        inner = _Ctx(self.ctx.workspace, self.ctx.protected, self.ctx.home, self.ctx.cwd,
                     self.ctx.env, self.ctx.depth + 1)
        sub = _Walker(inner)
        sub.functions = set(self.functions)
        sub.parse_and_walk(script)
        for f in sub.findings:
            f.reason = prefix + f.reason
            self.findings.append(f)

    def eval_(self, base: str, args: list[_Arg]) -> None:
        if any(a.node is not None and any(p.kind in ("parameter", "commandsubstitution")
                                          for p in _word_parts(a.node)) for a in args):
            self.add(UNKNOWN, "eval runs a command built at run time")
            return
        self.shell_string(" ".join(a.text for a in args), "eval: ")

    def source(self, base: str, args: list[_Arg]) -> None:
        self.add(UNKNOWN, f"{base} runs the script {args[0].text if args else ''}; "
                          f"its content is not checked")

    def trap(self, base: str, args: list[_Arg]) -> None:
        if args and not args[0].text.startswith("-"):
            self.shell_string(args[0].text, "trap: ")

    def interpreter(self, base: str, args: list[_Arg]) -> None:
        if args and all(a.text in _VERSION_FLAGS for a in args):
            return
        low = base.lower()
        if low.startswith("perl") and any(re.match(r"^-[a-zA-Z]*i", a.text) for a in args):
            self.add(DESTRUCTIVE, "perl -i edits files in place")
            return
        if low in ("go", "cargo") and args and args[0].text in ("version", "env", "list", "doc",
                                                                "help", "vet", "--version"):
            return
        self.add(UNKNOWN, f"{base} runs code whose effect cannot be classified")

    def git(self, base: str, args: list[_Arg]) -> None:
        i = 0
        cwd = self.ctx.cwd
        while i < len(args) and args[i].text.startswith("-"):
            text = args[i].text
            if text == "-C" and i + 1 < len(args):
                cwd = self.resolve(args[i + 1])
                i += 2
                continue
            if text in ("-c", "--config-env", "--exec-path") or text.startswith("--exec-path="):
                self.add(UNKNOWN, f"git {text} can make git run arbitrary programs")
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
        if cwd is not None and self.where(cwd) == "protected":
            self.protected_hit(cwd)
            return
        in_ws = cwd is not None and self.where(cwd) == "workspace"
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
                self.add(DESTRUCTIVE, f"git {sub} --output writes (overwrites) a file")
            return
        if sub == "branch":
            if flag("-D", "--delete", "-d") or short("D") or (short("d") and not flag("--list")):
                self.add(DESTRUCTIVE, "git branch -d/-D deletes a branch", snapshot=snap)
            elif flag("-f", "--force", "-M", "-C") or short("f"):
                self.add(DESTRUCTIVE, "git branch --force resets a branch", snapshot=snap)
            elif [r for r in rest if not r.startswith("-")] and not flag("--list", "-l",
                                                                          "--contains", "-a",
                                                                          "-r", "--merged",
                                                                          "--no-merged"):
                self._git_write(in_ws, "git branch creates a branch")
            return
        if sub == "tag":
            if flag("-d", "--delete"):
                self.add(DESTRUCTIVE, "git tag -d deletes a tag", snapshot=snap)
            elif [r for r in rest if not r.startswith("-")] and not flag("-l", "--list"):
                self._git_write(in_ws, "git tag creates a tag")
            return
        if sub == "stash":
            action = rest[0] if rest else "push"
            if action in ("list", "show"):
                return
            if action in ("drop", "clear"):
                self.add(DESTRUCTIVE, f"git stash {action} discards stashed changes", snapshot=snap)
            else:
                self._git_write(in_ws, f"git stash {action} changes the working tree")
            return
        if sub == "remote":
            if not rest or rest[0] in ("-v", "show", "get-url", "--verbose"):
                return
            self._git_write(in_ws, "git remote changes the repository configuration")
            return
        if sub == "config":
            if flag("--get", "--list", "-l", "--get-all", "--get-regexp", "--show-origin"):
                return
            if len([r for r in rest if not r.startswith("-")]) <= 1:
                return
            self.add(UNKNOWN, "git config changes configuration (aliases, hooks and pagers "
                              "can run programs)")
            return
        if sub == "worktree":
            if rest and rest[0] == "list":
                return
            if rest and rest[0] in ("remove", "prune"):
                self.add(DESTRUCTIVE, f"git worktree {rest[0]} deletes a working tree")
                return
            self._git_write(in_ws, "git worktree changes working trees")
            return
        if sub == "reflog":
            if rest and rest[0] in ("expire", "delete"):
                self.add(DESTRUCTIVE, f"git reflog {rest[0]} discards history")
            return
        if sub == "clean":
            if flag("-n", "--dry-run") or (short("n") and not short("f")):
                return
            self.add(DESTRUCTIVE, "git clean deletes untracked files", snapshot=snap)
            return
        if sub == "reset":
            if flag("--hard", "--merge", "--keep"):
                self.add(DESTRUCTIVE, "git reset --hard discards uncommitted changes",
                         snapshot=snap)
            else:
                self._git_write(in_ws, "git reset moves the branch or unstages changes")
            return
        if sub in ("checkout", "switch"):
            if "--" in rest or "." in rest or flag("-f", "--force", "--discard-changes") \
                    or flag("--ours", "--theirs"):
                self.add(DESTRUCTIVE, f"git {sub} overwrites working-tree files", snapshot=snap)
            else:
                self._git_write(in_ws, f"git {sub} changes the checked-out branch")
            return
        if sub == "restore":
            if flag("--staged", "-S") and not flag("--worktree", "-W"):
                self._git_write(in_ws, "git restore --staged unstages changes")
            else:
                self.add(DESTRUCTIVE, "git restore discards working-tree changes", snapshot=snap)
            return
        if sub == "rm":
            if flag("--cached") and not flag("-f", "--force"):
                self._git_write(in_ws, "git rm --cached untracks files")
            else:
                self.add(DESTRUCTIVE, "git rm deletes files", snapshot=snap)
            return
        if sub == "push":
            if flag("-f", "--force", "--force-with-lease", "--delete", "-d", "--mirror",
                    "--prune") or short("f") or any(r.startswith("+") or r.startswith(":")
                                                    for r in rest):
                self.add(DESTRUCTIVE, "git push --force/--delete rewrites or deletes remote "
                                      "history")
            else:
                self.add(UNKNOWN, "git push publishes commits to another machine")
            return
        if sub in ("gc", "prune", "filter-branch", "filter-repo", "update-ref", "replace"):
            if sub == "gc" and not flag("--prune") and not any(r.startswith("--prune=")
                                                                for r in rest):
                self._git_write(in_ws, "git gc repacks the repository")
            else:
                self.add(DESTRUCTIVE, f"git {sub} can discard repository data")
            return
        if sub == "submodule":
            if rest and rest[0] in ("status", "summary"):
                return
            if rest and rest[0] == "deinit":
                self.add(DESTRUCTIVE, "git submodule deinit removes a submodule's files")
                return
            self.add(UNKNOWN, "git submodule can fetch and run other repositories' code")
            return
        if sub in ("add", "commit", "init", "clone", "fetch", "pull", "merge", "rebase", "mv",
                   "cherry-pick", "revert", "apply", "am", "notes", "bisect", "sparse-checkout",
                   "format-patch", "bundle", "archive", "mergetool", "maintenance", "lfs"):
            if sub == "clone":
                dests = [r for r in rest if not r.startswith("-")]
                if len(dests) >= 2:
                    self.write(_Arg(dests[-1]), "create", "git clone creates")
                else:
                    self._git_write(in_ws, "git clone creates a repository")
                return
            if sub == "apply" and flag("--check", "--stat", "--numstat", "--summary"):
                return
            self._git_write(in_ws, f"git {sub} changes the repository")
            return
        self.add(UNKNOWN, f"git {sub}: effect not classified")

    def _git_write(self, in_ws: bool, reason: str) -> None:
        if in_ws:
            self.add(WORKSPACE_WRITE, reason)
        else:
            self.add(DESTRUCTIVE, reason + " outside the workspace")

    def package_manager(self, base: str, args: list[_Arg]) -> None:
        words = [a.text for a in args if not a.text.startswith("-") or a.text in _PM_READ
                 or a.text in _PM_REMOVE]
        if not words:
            if base in ("pip", "pip3", "npm", "yarn", "pnpm", "brew", "gem", "conda"):
                return
            self.add(UNKNOWN, f"{base}: effect not classified")
            return
        action = words[0]
        if action in _PM_READ:
            return
        if action in _PM_REMOVE:
            self.add(DESTRUCTIVE, f"{base} {action} removes installed software")
            return
        self.add(UNKNOWN, f"{base} {action} installs or changes software")

    def containers(self, base: str, args: list[_Arg]) -> None:
        words = [a.text for a in args if not a.text.startswith("-")]
        if not words or words[0] in _CONTAINER_READ or (len(words) > 1 and words[0] in
                                                         ("container", "image", "volume",
                                                          "network") and words[1] in
                                                         ("ls", "list", "inspect")):
            return
        if words[0] in _CONTAINER_DESTROY or (len(words) > 1 and words[1] in _CONTAINER_DESTROY):
            self.add(DESTRUCTIVE, f"{base} {words[0]} removes or stops containers/resources")
            return
        self.add(UNKNOWN, f"{base} {words[0]}: effect not classified")

    def systemctl(self, base: str, args: list[_Arg]) -> None:
        words = [a.text for a in args if not a.text.startswith("-")]
        reads = {"status", "show", "cat", "list-units", "list-unit-files", "list-timers",
                 "list-sockets", "list-jobs", "list-dependencies", "is-active", "is-enabled",
                 "is-failed", "is-system-running", "get-default", "help", "--version"}
        if base == "service":
            if len(words) >= 2 and words[1] in ("status",) or words == ["--status-all"] or \
                    any(a.text == "--status-all" for a in args):
                return
        elif not words or words[0] in reads:
            return
        self.add(DESTRUCTIVE, f"{base} changes system services")

    def crontab(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        if "-l" in texts:
            return
        if "-r" in texts:
            self.add(DESTRUCTIVE, "crontab -r deletes the user's crontab")
            return
        self.add(UNKNOWN, "crontab installs scheduled commands")

    def system(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        if base == "sysctl" and not any(t in ("-w", "--write", "-p", "--load") or "=" in t
                                        for t in texts):
            return
        if base in ("iptables", "ip6tables") and texts and all(
                t in ("-L", "-S", "-n", "-v", "--list", "--line-numbers", "-t", "nat", "filter",
                      "mangle") for t in texts):
            return
        if base in ("mount",) and not [t for t in texts if not t.startswith("-")]:
            return
        if base in ("timedatectl", "hostnamectl", "localectl", "loginctl") and (
                not texts or texts[0] in ("status", "show", "list-timezones", "list-sessions",
                                          "list-users", "list-locales")):
            return
        if base in ("ifconfig", "route", "nmcli") and len(texts) <= 1:
            return
        if base in ("dpkg", "rpm") and texts and texts[0] in ("-l", "-L", "-s", "-S", "-q", "-qa",
                                                              "-qi", "-ql", "-qf", "--list",
                                                              "--status", "--search", "-V",
                                                              "--version", "--get-selections",
                                                              "--print-architecture"):
            return
        if base == "defaults" and texts and texts[0] in ("read", "domains", "find",
                                                         "read-type"):
            return
        if base in ("mkfifo", "mknod"):
            for a in _positional(args, takes_value={"-m", "--mode"}):
                self.write(a, "create", "creates")
                break
            return
        self.add(DESTRUCTIVE, f"{base} changes system configuration")

    def network_get(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        sends = {"-T", "--upload-file", "-d", "--data", "--data-binary", "--data-raw",
                 "--data-urlencode", "-F", "--form", "--form-string", "--json", "--post-data",
                 "--post-file", "--method", "--body-data", "--body-file", "-K", "--config",
                 "--ftp-create-dirs", "-Q", "--quote"}
        if any(t in sends or any(t.startswith(s + "=") for s in sends if s.startswith("--"))
               for t in texts):
            self.add(UNKNOWN, f"{base} sends data to another machine")
            return
        for i, t in enumerate(texts):
            if t in ("-X", "--request") and i + 1 < len(texts) and \
                    texts[i + 1].upper() not in ("GET", "HEAD", "OPTIONS"):
                self.add(UNKNOWN, f"{base} -X {texts[i + 1]} changes remote state")
                return
        wrote = False
        for i, a in enumerate(args):
            t = a.text
            if base == "curl":
                if t in ("-o", "--output") and i + 1 < len(args):
                    wrote = True
                    if args[i + 1].text != "-":
                        self.write(args[i + 1], "truncate", "downloads to")
                elif t.startswith("--output="):
                    wrote = True
                    self.write(_Arg(t.split("=", 1)[1], a.node), "truncate", "downloads to")
                elif t in ("-O", "--remote-name", "--remote-name-all", "-J") or \
                        (t.startswith("-") and not t.startswith("--") and "O" in t):
                    wrote = True
                    self._download_into_cwd(base)
            else:  # wget
                if re.match(r"^-[a-zA-Z]*O.+$", t):            # -qO- / -Ofile
                    wrote = True
                    value = t[t.index("O") + 1:]
                    if value != "-":
                        self.write(_Arg(value, a.node), "truncate", "downloads to")
                    continue
                if re.match(r"^-[a-zA-Z]+O$", t) and i + 1 < len(args):
                    t = "-O"
                if t in ("-O", "--output-document") and i + 1 < len(args):
                    wrote = True
                    if args[i + 1].text != "-":
                        self.write(args[i + 1], "truncate", "downloads to")
                elif t.startswith("--output-document="):
                    wrote = True
                    self.write(_Arg(t.split("=", 1)[1], a.node), "truncate", "downloads to")
                elif t in ("-P", "--directory-prefix") and i + 1 < len(args):
                    wrote = True
                    self.write(args[i + 1], "create", "downloads into")
                elif t in ("-o", "-a", "--output-file", "--append-output") and i + 1 < len(args):
                    self.write(args[i + 1], "append", "logs to")
        if base == "wget" and not wrote and not any(t in ("--spider", "-q", "-S") and
                                                    "--spider" in texts for t in texts):
            self._download_into_cwd(base)

    def _download_into_cwd(self, base: str) -> None:
        cwd = self.ctx.cwd
        if cwd is None:
            self.add(UNKNOWN, f"{base} downloads into a directory known only at run time")
        elif self.where(cwd) == "protected":
            self.protected_hit(cwd)
        elif self.where(cwd) == "workspace":
            self.add(WORKSPACE_WRITE, f"{base} downloads a file into {cwd}")
        else:
            self.add(DESTRUCTIVE, f"{base} downloads into {cwd}, outside the workspace")

    def tar(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        letters = ""
        for i, t in enumerate(texts):
            if t.startswith("--"):
                continue
            if t.startswith("-") or i == 0:
                letters += t.lstrip("-")
        long = set(t.split("=", 1)[0] for t in texts if t.startswith("--"))
        archive: Optional[_Arg] = None
        for i, t in enumerate(texts):
            if t.startswith("--file="):
                archive = _Arg(t.split("=", 1)[1], args[i].node)
            elif t == "--file" and i + 1 < len(texts):
                archive = args[i + 1]
            elif not t.startswith("--") and (t.startswith("-") or i == 0) and "f" in t:
                # the archive is the next argument that is not itself an option cluster
                j = i + 1
                if t.lstrip("-").endswith("f") and j < len(args):
                    archive = args[j]
        dest_dir = None
        for i, t in enumerate(texts):
            if t in ("-C", "--directory") and i + 1 < len(args):
                dest_dir = args[i + 1]
            elif t.startswith("--directory="):
                dest_dir = _Arg(t.split("=", 1)[1], args[i].node)
        if "--delete" in long:
            self.add(DESTRUCTIVE, "tar --delete removes members from an archive",
                     paths=[p for p in [self.resolve(archive)] if p] if archive else [])
            return
        if "t" in letters or "--list" in long or "--diff" in long or "d" in letters \
                or "--compare" in long:
            if archive:
                self.read(archive)
            return
        if any(c in letters for c in "cru") or long & {"--create", "--append", "--update"}:
            if archive and archive.text != "-":
                mode = "truncate" if ("c" in letters or "--create" in long) else "modify"
                self.write(archive, mode, "writes the archive")
            if "--remove-files" in long:
                self.add(DESTRUCTIVE, "tar --remove-files deletes the archived files",
                         snapshot=self._cwd_snapshot())
            return
        if "x" in letters or long & {"--extract", "--get"}:
            if archive:
                self.read(archive)
            target = dest_dir or (_Arg(self.ctx.cwd) if self.ctx.cwd else _Arg("<cwd>",
                                                                              opaque=True))
            keep = "k" in letters or long & {"--keep-old-files", "--skip-old-files",
                                             "--keep-newer-files"}
            if keep:
                self.write(target, "create", "extracts into")
            else:
                path = self.resolve(target)
                if path is not None and self.where(path) == "protected":
                    self.protected_hit(path)
                elif path is not None and self.where(path) == "workspace":
                    self.add(DESTRUCTIVE, f"tar -x may overwrite existing files in {path}",
                             snapshot=[path])
                else:
                    self.add(DESTRUCTIVE, f"tar -x extracts into {target.text}, outside the "
                                          f"workspace or unknown")
            return
        self.add(UNKNOWN, "tar: mode not recognised")

    def unzip(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        if any(t in ("-l", "-t", "-v", "-Z", "-p", "-c", "-z", "-lv") for t in texts):
            return
        dest = None
        for i, t in enumerate(texts):
            if t == "-d" and i + 1 < len(args):
                dest = args[i + 1]
        target = dest or (_Arg(self.ctx.cwd) if self.ctx.cwd else _Arg("<cwd>", opaque=True))
        path = self.resolve(target)
        if path is not None and self.where(path) == "protected":
            self.protected_hit(path)
            return
        if "-o" in texts or any(t.startswith("-") and "o" in t[1:] for t in texts):
            self.add(DESTRUCTIVE, f"{base} -o overwrites existing files",
                     snapshot=[path] if path and self.where(path) == "workspace" else [])
            return
        self.write(target, "create", "extracts into")

    def compress(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        if any(t in ("-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test", "-h",
                     "--help", "-V", "--version") or (t.startswith("-") and not t.startswith("--")
                                                      and any(c in t for c in "clt"))
               for t in texts):
            for a in _positional(args):
                self.read(a)
            return
        keep = any(t in ("-k", "--keep") or (t.startswith("-") and not t.startswith("--")
                                             and "k" in t) for t in texts)
        if base.startswith("zstd") and "--rm" not in texts:
            keep = True
        force = any(t in ("-f", "--force") for t in texts)
        files = _positional(args, takes_value={"-S", "--suffix", "-o"})
        if not files:
            return                               # a filter on stdin/stdout
        for f in files:
            if keep and not force:
                self.write(f, "create", f"{base} writes a (de)compressed copy next to")
            else:
                self.delete(f, f"{base} replaces")

    def zip(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        positional = _positional(args, takes_value={"-x", "-i", "-b", "-n", "-t", "-tt", "-P",
                                                    "-O", "--out", "-Z"})
        if any(t in ("-m", "--move", "-d", "--delete") for t in texts):
            self.add(DESTRUCTIVE, "zip -m/-d deletes files or archive members",
                     snapshot=self._cwd_snapshot())
            return
        if positional:
            self.write(positional[0], "create", "writes the archive")
            for a in positional[1:]:
                self.read(a)

    def rsync(self, base: str, args: list[_Arg]) -> None:
        texts = [a.text for a in args]
        positional = _positional(args, takes_value={"-e", "--rsh", "--exclude", "--include",
                                                    "--filter", "-f", "--exclude-from",
                                                    "--include-from", "--files-from", "-T",
                                                    "--temp-dir", "--backup-dir", "--suffix",
                                                    "--chmod", "--chown", "-B", "--block-size",
                                                    "--port", "--bwlimit", "--log-file"})
        if len(positional) < 2:
            self.add(UNKNOWN, "rsync with unexpected arguments")
            return
        dest = positional[-1]
        if any(":" in a.text.split("/")[0] for a in positional):
            self.add(UNKNOWN, "rsync copies to or from another machine")
            return
        if any(t.startswith("--delete") or t == "--remove-source-files" for t in texts):
            path = self.resolve(dest)
            self.add(DESTRUCTIVE, "rsync --delete/--remove-source-files deletes files",
                     snapshot=[path] if path and self.where(path) == "workspace" else [])
            return
        for a in positional[:-1]:
            self.read(a)
        path = self.resolve(dest)
        if path is not None and self.where(path) == "workspace" and _exists(path):
            self.add(DESTRUCTIVE, f"rsync may overwrite files in {path}", snapshot=[path])
        else:
            self.write(dest, "create", "rsync writes")

    def patch(self, base: str, args: list[_Arg]) -> None:
        if any(a.text in ("--dry-run", "-C", "--check") for a in args):
            return
        self.add(DESTRUCTIVE, "patch modifies files in place", snapshot=self._cwd_snapshot())

    def split(self, base: str, args: list[_Arg]) -> None:
        in_ws = self.ctx.cwd is not None and self.where(self.ctx.cwd) == "workspace"
        self.add(WORKSPACE_WRITE if in_ws else DESTRUCTIVE,
                 f"{base} writes new files into the working directory")

    def hostname(self, base: str, args: list[_Arg]) -> None:
        if [a for a in args if not a.text.startswith("-")]:
            self.add(DESTRUCTIVE, "hostname NAME changes the machine's name")

    def iconv(self, base: str, args: list[_Arg]) -> None:
        for i, a in enumerate(args):
            if a.text in ("-o", "--output") and i + 1 < len(args):
                self.write(args[i + 1], "truncate", "writes")
            elif a.text.startswith("--output="):
                self.write(_Arg(a.text.split("=", 1)[1], a.node), "truncate", "writes")

    def journalctl(self, base: str, args: list[_Arg]) -> None:
        if any(a.text.startswith(("--vacuum", "--rotate", "--flush", "--sync", "--relinquish"))
               for a in args):
            self.add(DESTRUCTIVE, "journalctl --vacuum/--rotate changes the system journal")

    def ip(self, base: str, args: list[_Arg]) -> None:
        words = [a.text for a in args if not a.text.startswith("-")]
        if len(words) <= 1 or words[1] in ("show", "list", "ls", "get") or \
                (len(words) >= 2 and words[0] in ("addr", "a", "route", "r", "link", "l",
                                                  "neigh", "n") and words[1] in ("show", "list")):
            return
        self.add(DESTRUCTIVE, "ip changes network configuration")

    # -- entry --------------------------------------------------------------------------------
    def parse_and_walk(self, command: str) -> None:
        # bashlex does not implement the `time` keyword; dropping it hides no command.
        command = _TIME_KEYWORD.sub(r"\1", command)
        try:
            trees = bashlex.parse(command)
        except (bashlex.errors.ParsingError, NotImplementedError, IndexError, AttributeError,
                TypeError, ValueError, AssertionError, RecursionError) as exc:
            detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            self.add(UNKNOWN, f"the command could not be parsed ({detail}); it is not run "
                              f"without approval")
            return
        for tree in trees:
            self.visit(tree)


def _positional(args: list[_Arg], takes_value: set[str] | frozenset = frozenset()) -> list[_Arg]:
    """Non-option arguments (everything after `--` counts)."""
    out: list[_Arg] = []
    skip = False
    after = False
    for a in args:
        if skip:
            skip = False
            continue
        if after:
            out.append(a)
            continue
        if a.text == "--":
            after = True
            continue
        if a.text in takes_value:
            skip = True
            continue
        if a.text.startswith("-") and a.text != "-" and not a.opaque:
            continue
        out.append(a)
    return out


def _word_parts(node) -> list:
    """Every sub-node of a word (parameters, tildes, substitutions), depth-first."""
    out = []
    stack = list(getattr(node, "parts", []) or [])
    while stack:
        part = stack.pop(0)
        out.append(part)
        if part.kind not in ("commandsubstitution", "processsubstitution"):
            stack.extend(getattr(part, "parts", []) or [])
    return out


def _looks_like_path(text: str) -> bool:
    return "/" in text or text.startswith("~") or text.startswith(".") or "$" in text


def mentions_path(text: str, path: str) -> bool:
    """`path` appears in `text` as a whole path (so /tmp/rm1 is not found in /tmp/rm1ws/a)."""
    return re.search(re.escape(path.rstrip("/")) + r"(?![A-Za-z0-9._~+-])", text) is not None


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _glob_base(path: str) -> str:
    m = _GLOB_CHARS.search(path)
    return os.path.dirname(path[: m.start()]) if m else path


def _glob_may_match(pattern: str, root: str) -> bool:
    """Could a glob such as /home/u/.a* expand to (something inside) the protected root?"""
    import fnmatch
    parts_p = pattern.rstrip("/").split("/")
    parts_r = root.rstrip("/").split("/")
    for p, r in zip(parts_p, parts_r):
        if r.startswith(".") and not p.startswith("."):
            return False                      # bash globs skip dot files (dotglob is off)
        if not fnmatch.fnmatchcase(r, p):
            return False
    return True


def _exists(path: str) -> bool:
    if _GLOB_CHARS.search(path):
        return bool(globmod.glob(path))
    return os.path.lexists(path)


def _handlers() -> dict:
    w = _Walker
    table = {
        "truncate": w.truncate, "dd": w.dd, "cp": w.copy_move, "mv": w.copy_move,
        "install": w.copy_move, "ln": w.link, "mkdir": w.make, "touch": w.make, "mktemp": w.make,
        "chmod": w.permissions, "chown": w.permissions, "chgrp": w.permissions, "tee": w.tee,
        "sort": w.sort, "uniq": w.uniq, "sed": w.sed, "gsed": w.sed, "awk": w.awk, "gawk": w.awk,
        "mawk": w.awk, "nawk": w.awk, "find": w.find, "gfind": w.find, "xargs": w.xargs,
        "eval": w.eval_, "source": w.source, ".": w.source, "trap": w.trap, "git": w.git,
        "docker": w.containers, "podman": w.containers, "kubectl": w.containers,
        "docker-compose": w.containers, "systemctl": w.systemctl, "service": w.systemctl,
        "crontab": w.crontab, "curl": w.network_get, "wget": w.network_get, "tar": w.tar,
        "gtar": w.tar, "bsdtar": w.tar, "unzip": w.unzip, "zip": w.zip, "rsync": w.rsync,
        "patch": w.patch, "split": w.split, "csplit": w.split, "hostname": w.hostname,
        "iconv": w.iconv, "journalctl": w.journalctl, "ip": w.ip,
    }
    for name in ("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd",
                 "unzstd", "lz4", "unlz4", "compress", "uncompress", "pigz", "pbzip2"):
        table[name] = w.compress
    for name in ("sudo", "doas", "nice", "ionice", "nohup", "time", "timeout", "stdbuf", "chrt",
                 "taskset", "env", "command", "builtin", "exec", "setsid", "strace", "ltrace",
                 "unbuffer", "caffeinate", "flock", "watch", "firejail", "proxychains",
                 "torsocks", "catchsegv", "valgrind", "faketime", "xvfb-run", "dbus-run-session"):
        table[name] = w.wrapper
    return table


_HANDLERS = _handlers()


# ---------------------------------------------------------------------------------------------
# public API: classification
# ---------------------------------------------------------------------------------------------

def protected_roots(settings: Settings) -> tuple[str, ...]:
    """artoo's own state: the data dir and the runtime dir (ipc sockets, pid files)."""
    roots = {os.path.realpath(settings.home), os.path.realpath(settings.run_dir)}
    return tuple(sorted(roots))


def classify(command: str, *, workspace: str | Path, protected: Iterable[str | Path] = (),
             cwd: str | Path | None = None, home: str | None = None) -> Classification:
    """Classify one shell command (see the module docstring)."""
    ws = os.path.realpath(workspace)
    roots = tuple(os.path.realpath(p) for p in protected)
    home = home or os.path.expanduser("~")
    env = {"HOME": home, "USER": os.environ.get("USER", ""), "LOGNAME": os.environ.get("USER", ""),
           "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    ctx = _Ctx(ws, roots, home, os.path.realpath(cwd) if cwd else ws, env)
    walker = _Walker(ctx)
    text = command.strip()
    if not text:
        return Classification(command, READ_ONLY, "empty command")
    if "\x00" in text:
        return Classification(command, UNKNOWN, "the command contains a NUL byte",
                              [Finding(UNKNOWN, "NUL byte")])
    for root in roots:
        for spelling in _spellings(root, home):
            if mentions_path(text, spelling):
                walker.protected_hit(root)
                break
    walker.parse_and_walk(text)
    findings = walker.findings
    if not findings:
        return Classification(command, READ_ONLY, "only reads", [])
    protected_hit = any(f.protected for f in findings)
    if protected_hit:
        worst = [f for f in findings if f.protected]
        return Classification(command, DESTRUCTIVE, worst[0].reason, findings, protected=True)
    level = max((f.level for f in findings), key=_RANK.__getitem__)
    reasons = _dedup(f.reason for f in findings if f.level == level)
    reason = "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else "")
    return Classification(command, level, reason, findings)


def _spellings(root: str, home: str) -> list[str]:
    out = [root]
    if _within(root, home) and root != home:
        rel = root[len(home.rstrip("/")) + 1:]
        out += [f"~/{rel}", f"$HOME/{rel}", f"${{HOME}}/{rel}"]
    return out


def classify_for(settings: Settings, command: str, cwd: str | Path | None = None
                 ) -> Classification:
    return classify(command, workspace=settings.workspace, protected=protected_roots(settings),
                    cwd=cwd)


# ---------------------------------------------------------------------------------------------
# approvals
# ---------------------------------------------------------------------------------------------

@dataclass
class Decision:
    approved: bool
    decided_by: str
    reason: str = ""


def law1_refusal(what: str, decision: Decision) -> str:
    """The `[LAW1]` tool result for a refused action; it must reach the final summary."""
    why = {"timeout": "no answer from the operator in time", "no-operator":
           "no operator is present to approve it", "operator": "the operator declined"}.get(
        decision.decided_by, decision.decided_by)
    extra = f" ({decision.reason})" if decision.reason and decision.decided_by == "operator" \
        else ""
    return (f"{LAW1} refused: {what} — {why}{extra}. The action was not performed; do not try "
            f"to achieve it another way. Report that it needs the operator's approval "
            f"(re-run with --yes to pre-approve).")


class ApprovalGate:
    """Asks the operator to approve one specific action, over the bus (Law 1).

    The effector registers `on_decision` for ApprovalDecision with ack=True and `expects` as the
    filter, so only the effector that asked acknowledges the decision.
    """

    def __init__(self, client, subtask: SubTask, settings: Settings, *,
                 deadline_at: float = 0.0):
        self.client = client
        self.subtask = subtask
        self.settings = settings
        self.deadline_at = deadline_at
        self._lock = threading.Lock()
        self._pending: dict[str, list] = {}        # approval id -> [event, decision]
        self._count = 0

    def expects(self, env, msg) -> bool:
        return getattr(msg, "approval_id", None) in self._pending

    def on_decision(self, env, msg: ApprovalDecision) -> None:
        with self._lock:
            slot = self._pending.get(msg.approval_id)
            if slot is None or slot[1] is not None:
                return
            by = msg.decided_by or "operator"
            slot[1] = Decision(bool(msg.approved), by, msg.reason)
            slot[0].set()

    def ask(self, *, kind: str, command: str, paths: list[str], classification: str,
            reason: str) -> Decision:
        opts = self.subtask.options
        task_id = self.subtask.parent_task_id
        if opts.yes:
            decision = Decision(True, "--yes", "pre-approved by --yes")
        elif not opts.interactive:
            decision = Decision(False, "no-operator", "the run has no operator to ask")
        else:
            with self._lock:
                self._count += 1
                approval_id = f"{self.subtask.subtask_id}-a{self._count}-{os.getpid()}"
                slot = [threading.Event(), None]
                self._pending[approval_id] = slot
            request = ApprovalRequest(task_id=task_id, subtask_id=self.subtask.subtask_id,
                                      approval_id=approval_id, kind=kind, command=command,
                                      paths=paths, classification=classification, reason=reason)
            self.client.send(request, consumers=("user",), as_role="executor")
            wait = self.settings.approval_timeout_s
            if self.deadline_at:
                wait = max(0.0, min(wait, self.deadline_at - time.time()))
            slot[0].wait(wait)
            with self._lock:
                decision = slot[1] or Decision(False, "timeout",
                                               f"no decision within {wait:.0f}s")
                self._pending.pop(approval_id, None)
        tasklog.append(self.settings.tasks_dir, task_id, "approval",
                       subtask_id=self.subtask.subtask_id, action=kind, command=command,
                       paths=paths, classification=classification, reason=reason,
                       approved=decision.approved, decided_by=decision.decided_by)
        return decision


# ---------------------------------------------------------------------------------------------
# undo
# ---------------------------------------------------------------------------------------------

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def undo_dir(settings: Settings, run_id: str) -> Path:
    return Path(settings.home) / "undo" / _SAFE.sub("_", run_id)[:120]


class UndoStore:
    """Copies of what approved actions delete or overwrite inside the workspace."""

    def __init__(self, settings: Settings, run_id: str):
        self.settings = settings
        self.root = undo_dir(settings, run_id)
        self.workspace = os.path.realpath(settings.workspace)
        self._lock = threading.Lock()

    def save(self, paths: Iterable[str], *, command: str, subtask_id: str = "",
             snapshot_roots: Iterable[str] = ()) -> str:
        """Copy the given workspace paths (globs expanded) and whole snapshot dirs. Returns a
        one-line note for the tool result."""
        items: list[str] = []
        for p in list(paths) + list(snapshot_roots):
            expanded = globmod.glob(p) if _GLOB_CHARS.search(p) else [p]
            for e in expanded:
                real = os.path.realpath(os.path.dirname(e)) + "/" + os.path.basename(e)
                if _within(real, self.workspace) and os.path.lexists(real) and real not in items:
                    items.append(real)
        # A path inside another saved dir is already covered.
        items = [p for p in items if not any(o != p and _within(p, o) for o in items)]
        if not items:
            return ""
        size = sum(_tree_size(p) for p in items)
        if size > self.settings.undo_max_bytes:
            return (f"no undo copy: {size / 1e6:.0f} MB exceeds undo_max_bytes "
                    f"({self.settings.undo_max_bytes / 1e6:.0f} MB)")
        with self._lock:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            n = len([d for d in self.root.iterdir() if d.is_dir()])
            entry = self.root / f"{n:04d}"
            while entry.exists():
                n += 1
                entry = self.root / f"{n:04d}"
            entry.mkdir(mode=0o700)
            manifest = []
            for i, path in enumerate(items):
                backup = entry / "files" / str(i)
                backup.parent.mkdir(exist_ok=True)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.copytree(path, backup, symlinks=True)
                    kind = "dir"
                else:
                    shutil.copy2(path, backup, follow_symlinks=False)
                    kind = "file"
                manifest.append({"original": path, "backup": str(backup.relative_to(entry)),
                                 "kind": kind})
            (entry / "manifest.json").write_text(json.dumps(
                {"command": command, "subtask_id": subtask_id, "ts": time.time(),
                 "items": manifest}, indent=1))
        return f"undo copy kept for {len(items)} path(s)"


def _tree_size(path: str) -> int:
    if os.path.islink(path) or not os.path.isdir(path):
        try:
            return os.lstat(path).st_size
        except OSError:
            return 0
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def undo_entries(settings: Settings, run_id: str) -> list[dict]:
    root = undo_dir(settings, run_id)
    if not root.is_dir():
        return []
    out = []
    for entry in sorted(d for d in root.iterdir() if d.is_dir()):
        try:
            manifest = json.loads((entry / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        manifest["entry"] = str(entry)
        out.append(manifest)
    return out


def restore(settings: Settings, run_id: str) -> list[str]:
    """Put back every saved path of a run, newest action first, so the oldest copy wins.
    Only paths inside the workspace are ever written. Returns the restored paths."""
    workspace = os.path.realpath(settings.workspace)
    restored: list[str] = []
    for manifest in reversed(undo_entries(settings, run_id)):
        entry = Path(manifest["entry"])
        for item in manifest.get("items", []):
            original = item["original"]
            parent = os.path.realpath(os.path.dirname(original))
            if not _within(parent + "/" + os.path.basename(original), workspace):
                log.warning("undo: skipping %s (outside the workspace)", original)
                continue
            backup = entry / item["backup"]
            os.makedirs(parent, exist_ok=True)
            if item["kind"] == "dir":
                if os.path.lexists(original) and not os.path.isdir(original):
                    os.unlink(original)
                shutil.copytree(backup, original, symlinks=True, dirs_exist_ok=True)
            else:
                if os.path.isdir(original) and not os.path.islink(original):
                    shutil.rmtree(original)
                elif os.path.lexists(original):
                    os.unlink(original)
                shutil.copy2(backup, original, follow_symlinks=False)
            if original not in restored:
                restored.append(original)
    return restored
