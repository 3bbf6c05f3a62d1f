"""Archivers and compressors: tar, unzip, zip, gzip and friends, rsync."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..levels import DESTRUCTIVE, UNKNOWN
from ..paths import exists
from ..words import Arg, positional_args
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


@handles("tar", "gtar", "bsdtar")
def tar(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    letters = ""
    for i, t in enumerate(texts):
        if t.startswith("--"):
            continue
        if t.startswith("-") or i == 0:
            letters += t.lstrip("-")
    long = set(t.split("=", 1)[0] for t in texts if t.startswith("--"))
    archive: Optional[Arg] = None
    for i, t in enumerate(texts):
        if t.startswith("--file="):
            archive = Arg(t.split("=", 1)[1], args[i].node)
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
            dest_dir = Arg(t.split("=", 1)[1], args[i].node)
    if "--delete" in long:
        w.add(DESTRUCTIVE, "tar --delete removes members from an archive",
              paths=[p for p in [w.resolve(archive)] if p] if archive else [])
        return
    if "t" in letters or "--list" in long or "--diff" in long or "d" in letters \
            or "--compare" in long:
        if archive:
            w.read(archive)
        return
    if any(c in letters for c in "cru") or long & {"--create", "--append", "--update"}:
        if archive and archive.text != "-":
            mode = "truncate" if ("c" in letters or "--create" in long) else "modify"
            w.write(archive, mode, "writes the archive")
        if "--remove-files" in long:
            w.add(DESTRUCTIVE, "tar --remove-files deletes the archived files",
                  snapshot=w.cwd_snapshot())
        return
    if "x" in letters or long & {"--extract", "--get"}:
        if archive:
            w.read(archive)
        target = dest_dir or (Arg(w.ctx.cwd) if w.ctx.cwd else Arg("<cwd>",
                                                                          opaque=True))
        keep = "k" in letters or long & {"--keep-old-files", "--skip-old-files",
                                         "--keep-newer-files"}
        if keep:
            w.write(target, "create", "extracts into")
        else:
            path = w.resolve(target)
            if path is not None and w.where(path) == "protected":
                w.protected_hit(path)
            elif path is not None and w.where(path) == "workspace":
                w.add(DESTRUCTIVE, f"tar -x may overwrite existing files in {path}",
                      snapshot=[path])
            else:
                w.add(DESTRUCTIVE, f"tar -x extracts into {target.text}, outside the "
                                      f"workspace or unknown")
        return
    w.add(UNKNOWN, "tar: mode not recognised")


@handles("unzip")
def unzip(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    if any(t in ("-l", "-t", "-v", "-Z", "-p", "-c", "-z", "-lv") for t in texts):
        return
    dest = None
    for i, t in enumerate(texts):
        if t == "-d" and i + 1 < len(args):
            dest = args[i + 1]
    target = dest or (Arg(w.ctx.cwd) if w.ctx.cwd else Arg("<cwd>", opaque=True))
    path = w.resolve(target)
    if path is not None and w.where(path) == "protected":
        w.protected_hit(path)
        return
    if "-o" in texts or any(t.startswith("-") and "o" in t[1:] for t in texts):
        w.add(DESTRUCTIVE, f"{base} -o overwrites existing files",
              snapshot=[path] if path and w.where(path) == "workspace" else [])
        return
    w.write(target, "create", "extracts into")


@handles("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd", "unzstd",
         "lz4", "unlz4", "compress", "uncompress", "pigz", "pbzip2")
def compress(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    if any(t in ("-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test", "-h",
                 "--help", "-V", "--version") or (t.startswith("-") and not t.startswith("--")
                                                  and any(c in t for c in "clt"))
           for t in texts):
        for a in positional_args(args):
            w.read(a)
        return
    keep = any(t in ("-k", "--keep") or (t.startswith("-") and not t.startswith("--")
                                         and "k" in t) for t in texts)
    if base.startswith("zstd") and "--rm" not in texts:
        keep = True
    force = any(t in ("-f", "--force") for t in texts)
    files = positional_args(args, takes_value={"-S", "--suffix", "-o"})
    if not files:
        return                               # a filter on stdin/stdout
    for f in files:
        if keep and not force:
            w.write(f, "create", f"{base} writes a (de)compressed copy next to")
        else:
            w.delete(f, f"{base} replaces")


@handles("zip")
def zip(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    positional = positional_args(args, takes_value={"-x", "-i", "-b", "-n", "-t", "-tt", "-P",
                                                    "-O", "--out", "-Z"})
    if any(t in ("-m", "--move", "-d", "--delete") for t in texts):
        w.add(DESTRUCTIVE, "zip -m/-d deletes files or archive members",
              snapshot=w.cwd_snapshot())
        return
    if positional:
        w.write(positional[0], "create", "writes the archive")
        for a in positional[1:]:
            w.read(a)


@handles("rsync")
def rsync(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    positional = positional_args(args, takes_value={"-e", "--rsh", "--exclude", "--include",
                                                    "--filter", "-f", "--exclude-from",
                                                    "--include-from", "--files-from", "-T",
                                                    "--temp-dir", "--backup-dir", "--suffix",
                                                    "--chmod", "--chown", "-B", "--block-size",
                                                    "--port", "--bwlimit", "--log-file"})
    if len(positional) < 2:
        w.add(UNKNOWN, "rsync with unexpected arguments")
        return
    dest = positional[-1]
    if any(":" in a.text.split("/")[0] for a in positional):
        w.add(UNKNOWN, "rsync copies to or from another machine")
        return
    if any(t.startswith("--delete") or t == "--remove-source-files" for t in texts):
        path = w.resolve(dest)
        w.add(DESTRUCTIVE, "rsync --delete/--remove-source-files deletes files",
              snapshot=[path] if path and w.where(path) == "workspace" else [])
        return
    for a in positional[:-1]:
        w.read(a)
    path = w.resolve(dest)
    if path is not None and w.where(path) == "workspace" and exists(path):
        w.add(DESTRUCTIVE, f"rsync may overwrite files in {path}", snapshot=[path])
    else:
        w.write(dest, "create", "rsync writes")
