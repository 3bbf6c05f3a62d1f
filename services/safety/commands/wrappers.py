"""Programs that run another program (sudo, env, timeout, nice, watch, ...): that program is
classified; sudo/doas add running it as another user."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN
from ..words import DANGEROUS_VARS, Arg
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


@handles("sudo", "doas", "nice", "ionice", "nohup", "time", "timeout", "stdbuf", "chrt",
         "taskset", "env", "command", "builtin", "exec", "setsid", "strace", "ltrace",
         "unbuffer", "caffeinate", "flock", "watch", "firejail", "proxychains", "torsocks",
         "catchsegv", "valgrind", "faketime", "xvfb-run", "dbus-run-session")
def wrapper(w: Walker, base: str, args: list[Arg]) -> None:
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
            if name in DANGEROUS_VARS:
                w.add(UNKNOWN, f"sets {name}, which changes what the command runs")
            i += 1
            continue
        if base == "env" and (text.startswith("-S") or text.startswith("--split-string")):
            w.add(UNKNOWN, "env -S runs a command built from a string")
            return
        if base in ("sudo", "doas") and text in ("-s", "-i", "--shell", "--login", "-e",
                                                 "--edit"):
            w.add(DESTRUCTIVE, f"{base} {text} opens a root shell or editor")
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
            w.add(UNKNOWN, f"{base} without a command")
        return                               # `env` alone prints; `exec` alone redirects
    if base == "watch":
        w.shell_string(" ".join(a.text for a in inner), f"{base}: ")
        return
    before = len(w.findings)
    w.run(inner)
    if base in ("sudo", "doas"):
        w.add(UNKNOWN, f"{base} runs {inner[0].text} as another user (root)")
        for f in w.findings[before:]:
            f.reason = f"{base}: {f.reason}"
