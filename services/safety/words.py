"""How the Law 1 walker sees the words of one simple command: an argument (text, its bashlex node,
whether its value is only known at run time), the positional arguments, the sub-nodes of a word,
and the environment variables whose assignment changes what later commands run."""
from __future__ import annotations

from dataclasses import dataclass

DANGEROUS_VARS = frozenset({"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV",
                            "ENV", "PROMPT_COMMAND", "IFS", "SHELLOPTS", "BASHOPTS", "PS4",
                            "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER",
                            "PAGER", "EDITOR", "VISUAL", "PYTHONSTARTUP", "PERL5OPT",
                            "NODE_OPTIONS", "PYTHONPATH"})


@dataclass
class Arg:
    text: str
    node: object = None                   # bashlex word node, when there is one
    opaque: bool = False                  # value only known at run time (xargs input, `{}`)


def positional_args(args: list[Arg], takes_value: set[str] | frozenset = frozenset()) -> list[Arg]:
    """Non-option arguments (everything after `--` counts)."""
    out: list[Arg] = []
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


def word_parts(node) -> list:
    """Every sub-node of a word (parameters, tildes, substitutions), depth-first."""
    out = []
    stack = list(getattr(node, "parts", []) or [])
    while stack:
        part = stack.pop(0)
        out.append(part)
        if part.kind not in ("commandsubstitution", "processsubstitution"):
            stack.extend(getattr(part, "parts", []) or [])
    return out
