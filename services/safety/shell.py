"""The Law 1 shell walker: parses a command with bashlex and walks it (pipelines, lists, subshells,
compound commands, functions, command and process substitution, redirections, nested shell
strings), resolving paths against the working directory and collecting findings. What one program
does to its arguments is decided by its command family (services.safety.commands); a program no
family knows is `unknown`."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, Optional

import bashlex

from . import commands
from .levels import DESTRUCTIVE, UNKNOWN, WORKSPACE_WRITE, Finding
from .paths import NULL_DEVICES, exists, place
from .words import DANGEROUS_VARS, Arg, word_parts

_TIME_KEYWORD = re.compile(r"(^|[;&|(){}]\s*|\n\s*)time(\s+-p)?\s+")
_VAR = re.compile(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z_0-9]*|[0-9@*#?$!-])")


_PARSE_ERRORS = (bashlex.errors.ParsingError, NotImplementedError, IndexError, AttributeError,
                 TypeError, ValueError, AssertionError, RecursionError)


def lift_substitutions(command: str) -> tuple[str, list[str]] | None:
    """`$(…)` lifted out of a command bashlex cannot parse (it fails on `x=$(a && b)`): the
    outer command with each substitution replaced by a variable, and the inner commands, which
    are classified on their own. None when there is none or the parentheses do not balance."""
    out: list[str] = []
    inner: list[str] = []
    i, n = 0, len(command)
    while i < n:
        if command.startswith("$(", i) and not command.startswith("$((", i):
            depth, j, quote = 1, i + 2, ""
            while j < n and depth:
                c = command[j]
                if quote:
                    if c == quote:
                        quote = ""
                    elif c == "\\" and quote == '"':
                        j += 1
                elif c in "'\"":
                    quote = c
                elif c == "\\":
                    j += 1
                elif c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                j += 1
            if depth:
                return None
            inner.append(command[i + 2:j - 1])
            out.append(f"${{__artoo_subst_{len(inner) - 1}}}")
            i = j
        else:
            out.append(command[i])
            i += 1
    return ("".join(out), inner) if inner else None


@dataclass
class Ctx:
    workspace: str
    protected: tuple[str, ...]
    home: str
    cwd: Optional[str]
    env: dict[str, str]
    depth: int = 0


class Walker:
    """Walks one parsed command and collects findings."""

    def __init__(self, ctx: Ctx):
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
    def resolve(self, arg: Arg) -> Optional[str]:
        """The absolute path an argument names, or None when only known at run time."""
        if arg.opaque or "{}" in arg.text:
            return None
        node = arg.node
        if node is not None and any(p.kind in ("commandsubstitution", "processsubstitution")
                                    for p in word_parts(node)):
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
        if NULL_DEVICES.match(text):
            return text
        return os.path.realpath(text)

    def where(self, path: str) -> str:
        return place(path, self.ctx.workspace, self.ctx.protected)

    def read(self, arg: Arg) -> None:
        path = self.resolve(arg)
        if path is not None and self.where(path) == "protected":
            self.protected_hit(path)

    def write(self, arg: Arg, mode: str, what: str) -> None:
        """mode: truncate (existing content lost) / append / create (new entry) / modify."""
        path = self.resolve(arg)
        if path is None:
            level = DESTRUCTIVE if mode in ("truncate", "modify") else UNKNOWN
            self.add(level, f"{what} a path known only at run time ({arg.text})",
                     snapshot=self.cwd_snapshot())
            return
        place = self.where(path)
        if place == "null":
            return
        if place == "protected":
            self.protected_hit(path)
        elif place == "outside":
            self.add(DESTRUCTIVE, f"{what} {path}, outside the workspace")
        elif mode in ("truncate", "modify") and exists(path):
            verb = "overwrites" if mode == "truncate" else "modifies"
            self.add(DESTRUCTIVE, f"{verb} existing {path}", paths=[path])
        else:
            self.add(WORKSPACE_WRITE, f"{what} {path}")

    def delete(self, arg: Arg, what: str = "deletes") -> None:
        path = self.resolve(arg)
        if path is None:
            self.add(DESTRUCTIVE, f"{what} paths known only at run time ({arg.text})",
                     snapshot=self.cwd_snapshot())
            return
        place = self.where(path)
        if place == "protected":
            self.protected_hit(path)
        elif place == "outside":
            self.add(DESTRUCTIVE, f"{what} {path}, outside the workspace")
        else:
            self.add(DESTRUCTIVE, f"{what} {path}", paths=[path])

    def cwd_snapshot(self) -> list[str]:
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
        for part in word_parts(node):
            if part.kind in ("commandsubstitution", "processsubstitution"):
                self.visit(part.command)

    def redirect(self, node) -> None:
        target = node.output
        rtype = node.type
        if isinstance(target, int) or target is None:
            return                             # fd duplication (2>&1, >&2)
        self.substitutions(target)
        if any(p.kind == "processsubstitution" for p in word_parts(target)):
            return
        arg = Arg(target.word, target)
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
        words: list[Arg] = []
        assignments = []
        for part in node.parts:
            if part.kind == "word":
                self.substitutions(part)
                words.append(Arg(part.word, part))
            elif part.kind == "assignment":
                self.substitutions(part)
                assignments.append(part.word)
            elif part.kind == "redirect":
                self.redirect(part)
        for assignment in assignments:
            name = assignment.split("=", 1)[0].rstrip("+")
            if name in DANGEROUS_VARS:
                self.add(UNKNOWN, f"sets {name}, which changes what later commands run")
        if words:
            self.run(words)

    # -- one simple command -------------------------------------------------------------------
    def run(self, words: list[Arg]) -> None:
        head = words[0]
        if head.opaque or (head.node is not None and any(
                p.kind in ("parameter", "commandsubstitution", "processsubstitution")
                for p in word_parts(head.node))) or "$" in head.text:
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
        handler = commands.handler_for(base)
        if handler is not None:
            handler(self, base, args)
        else:
            self.add(UNKNOWN, f"unrecognised program {base}: its effect cannot be classified")

    def shell_string(self, script: str, prefix: str) -> None:
        if self.ctx.depth >= 4:
            self.add(UNKNOWN, "shell code nested too deeply to classify")
            return
        inner = Ctx(self.ctx.workspace, self.ctx.protected, self.ctx.home, self.ctx.cwd,
                    self.ctx.env, self.ctx.depth + 1)
        sub = Walker(inner)
        sub.functions = set(self.functions)
        sub.parse_and_walk(script)
        for f in sub.findings:
            f.reason = prefix + f.reason
            self.findings.append(f)

    # -- entry --------------------------------------------------------------------------------
    def parse_and_walk(self, command: str) -> None:
        # bashlex does not implement the `time` keyword; dropping it hides no command.
        command = _TIME_KEYWORD.sub(r"\1", command)
        try:
            trees = bashlex.parse(command)
        except _PARSE_ERRORS as exc:
            if self._walk_lifted(command):
                return
            detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            self.add(UNKNOWN, f"the command could not be parsed ({detail}); it is not run "
                              f"without approval")
            return
        for tree in trees:
            self.visit(tree)

    def _walk_lifted(self, command: str) -> bool:
        """bashlex fails on `x=$(a && b)`: walk the command with its substitutions lifted out
        (each becomes an opaque variable) and each substitution on its own. False when even that
        does not parse — the caller then fails closed."""
        lifted = lift_substitutions(command)
        if lifted is None:
            return False
        outer, inner = lifted
        try:
            trees = bashlex.parse(outer)
        except _PARSE_ERRORS:
            return False
        for sub in inner:
            self.parse_and_walk(sub)
        for tree in trees:
            self.visit(tree)
        return True
