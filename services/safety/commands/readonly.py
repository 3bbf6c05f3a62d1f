"""Programs that only read (their path arguments are still checked against the data dir), and
the shell builtins; `cd` moves the walker's working directory."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN
from ..paths import looks_like_path
from ..words import DANGEROUS_VARS, Arg
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


# Programs that only read (their file arguments are still checked against the data dir).
READ_ONLY = frozenset("""
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


@handles(*READ_ONLY)
def read_only(w: Walker, base: str, args: list[Arg]) -> None:
    if base in ("cd", "pushd"):
        target = next((a for a in args if not a.text.startswith("-")), None)
        if target is None:
            w.ctx.cwd = w.ctx.home
        elif target.text == "-":
            w.ctx.cwd = None
        else:
            path = w.resolve(target)
            if path is not None and w.where(path) == "protected":
                w.protected_hit(path)
            w.ctx.cwd = path
        return
    if base == "popd":
        w.ctx.cwd = None
        return
    if base in ("echo", "printf", "test", "[", "seq", "sleep", "expr", "export", "set",
                "local", "declare", "typeset", "readonly", "alias", "let", "read"):
        if base in ("export", "declare", "typeset", "local", "readonly"):
            for a in args:
                if a.text.split("=", 1)[0] in DANGEROUS_VARS and "=" in a.text:
                    w.add(UNKNOWN, f"sets {a.text.split('=', 1)[0]}, which changes what "
                                      f"later commands run")
        return
    if base == "date" and any(a.text in ("-s", "--set") or a.text.startswith("--set=")
                              for a in args):
        w.add(DESTRUCTIVE, "date --set changes the system clock")
        return
    if base == "history" and any(a.text in ("-c", "-d", "-w") for a in args):
        return
    if base == "dmesg" and any(a.text in ("-c", "-C", "--clear", "--read-clear", "-D", "-E")
                               for a in args):
        w.add(DESTRUCTIVE, "dmesg --clear erases the kernel log")
        return
    if base == "top" and not any(a.text.startswith("-b") for a in args):
        return
    for a in args:
        if not a.text.startswith("-") and looks_like_path(a.text):
            w.read(a)
