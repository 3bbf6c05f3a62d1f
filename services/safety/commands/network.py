"""Programs that talk to other machines: curl and wget (downloads are writes; uploads and
non-GET requests are unknown) and the senders (ssh, scp, rclone, ...)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN, WORKSPACE_WRITE
from ..words import Arg
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


SENDERS = frozenset({"ssh", "scp", "sftp", "nc", "ncat", "netcat", "socat", "telnet", "ftp",
                     "lftp", "mail", "mailx", "sendmail", "mutt", "msmtp", "rclone", "aws",
                     "gsutil", "az", "gcloud", "s3cmd", "gh", "hub", "glab", "twine"})


@handles(*SENDERS)
def sender(w: Walker, base: str, args: list[Arg]) -> None:
    w.add(UNKNOWN, f"{base} sends data to or acts on another machine")


@handles("curl", "wget")
def network_get(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    sends = {"-T", "--upload-file", "-d", "--data", "--data-binary", "--data-raw",
             "--data-urlencode", "-F", "--form", "--form-string", "--json", "--post-data",
             "--post-file", "--method", "--body-data", "--body-file", "-K", "--config",
             "--ftp-create-dirs", "-Q", "--quote"}
    if any(t in sends or any(t.startswith(s + "=") for s in sends if s.startswith("--"))
           for t in texts):
        w.add(UNKNOWN, f"{base} sends data to another machine")
        return
    for i, t in enumerate(texts):
        if t in ("-X", "--request") and i + 1 < len(texts) and \
                texts[i + 1].upper() not in ("GET", "HEAD", "OPTIONS"):
            w.add(UNKNOWN, f"{base} -X {texts[i + 1]} changes remote state")
            return
    wrote = False
    for i, a in enumerate(args):
        t = a.text
        if base == "curl":
            if t in ("-o", "--output") and i + 1 < len(args):
                wrote = True
                if args[i + 1].text != "-":
                    w.write(args[i + 1], "truncate", "downloads to")
            elif t.startswith("--output="):
                wrote = True
                w.write(Arg(t.split("=", 1)[1], a.node), "truncate", "downloads to")
            elif t in ("-O", "--remote-name", "--remote-name-all", "-J") or \
                    (t.startswith("-") and not t.startswith("--") and "O" in t):
                wrote = True
                _download_into_cwd(w, base)
        else:  # wget
            if re.match(r"^-[a-zA-Z]*O.+$", t):            # -qO- / -Ofile
                wrote = True
                value = t[t.index("O") + 1:]
                if value != "-":
                    w.write(Arg(value, a.node), "truncate", "downloads to")
                continue
            if re.match(r"^-[a-zA-Z]+O$", t) and i + 1 < len(args):
                t = "-O"
            if t in ("-O", "--output-document") and i + 1 < len(args):
                wrote = True
                if args[i + 1].text != "-":
                    w.write(args[i + 1], "truncate", "downloads to")
            elif t.startswith("--output-document="):
                wrote = True
                w.write(Arg(t.split("=", 1)[1], a.node), "truncate", "downloads to")
            elif t in ("-P", "--directory-prefix") and i + 1 < len(args):
                wrote = True
                w.write(args[i + 1], "create", "downloads into")
            elif t in ("-o", "-a", "--output-file", "--append-output") and i + 1 < len(args):
                w.write(args[i + 1], "append", "logs to")
    if base == "wget" and not wrote and not any(t in ("--spider", "-q", "-S") and
                                                "--spider" in texts for t in texts):
        _download_into_cwd(w, base)


def _download_into_cwd(w: Walker, base: str) -> None:
    cwd = w.ctx.cwd
    if cwd is None:
        w.add(UNKNOWN, f"{base} downloads into a directory known only at run time")
    elif w.where(cwd) == "protected":
        w.protected_hit(cwd)
    elif w.where(cwd) == "workspace":
        w.add(WORKSPACE_WRITE, f"{base} downloads a file into {cwd}")
    else:
        w.add(DESTRUCTIVE, f"{base} downloads into {cwd}, outside the workspace")
