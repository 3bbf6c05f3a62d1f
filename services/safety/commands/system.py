"""Programs that change the machine rather than files: storage formatters, process killers,
power and init, system configuration, services, crontab, hostname, the journal, ip, and
interactive programs."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN
from ..words import Arg, positional_args
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


FORMATTERS = re.compile(r"^(mkfs(\..+)?|mke2fs|mkswap|mkdosfs|mkntfs|fdisk|sfdisk|cfdisk|parted|"
                        r"gdisk|sgdisk|wipefs|blkdiscard|badblocks|zpool|lvremove|vgremove|"
                        r"pvremove|"
                        r"cryptsetup|format)$")
KILLERS = frozenset({"kill", "pkill", "killall", "skill", "xkill", "killall5"})
POWER = frozenset({"shutdown", "reboot", "halt", "poweroff", "init", "telinit", "systemd-run"})
SYSTEM = frozenset({"mount", "umount", "swapon", "swapoff", "losetup", "modprobe", "rmmod",
                    "insmod", "iptables", "ip6tables", "nft", "ufw", "firewall-cmd", "useradd",
                    "userdel", "usermod", "groupadd", "groupdel", "groupmod", "passwd", "chpasswd",
                    "visudo", "update-alternatives", "ldconfig", "hwclock", "setfacl", "chattr",
                    "chroot", "mknod", "mkfifo", "sysctl", "timedatectl", "hostnamectl",
                    "localectl", "loginctl", "nmcli", "route", "ifconfig", "ifup", "ifdown",
                    "dpkg", "rpm", "update-grub", "grub-install", "efibootmgr", "setenforce",
                    "launchctl", "defaults", "diskutil", "tmutil", "csrutil", "scutil", "at",
                    "batch", "atrm"})
INTERACTIVE = frozenset({"vi", "vim", "nvim", "nano", "emacs", "ed", "ex", "pico", "joe", "mcedit",
                         "tmux", "screen", "open", "xdg-open", "code", "subl"})


@handles(pattern=FORMATTERS)
def formatter(w: Walker, base: str, args: list[Arg]) -> None:
    w.add(DESTRUCTIVE, f"{base} formats, partitions or wipes storage")


@handles(*KILLERS)
def killer(w: Walker, base: str, args: list[Arg]) -> None:
    if any(a.text in ("-l", "-L", "--list", "-0") for a in args):
        return
    w.add(DESTRUCTIVE, f"{base} terminates processes")


@handles(*POWER)
def power(w: Walker, base: str, args: list[Arg]) -> None:
    w.add(DESTRUCTIVE, f"{base} changes the machine's power or init state")


@handles(*INTERACTIVE)
def interactive(w: Walker, base: str, args: list[Arg]) -> None:
    w.add(UNKNOWN, f"{base} is interactive or opens other programs")


@handles(*SYSTEM)
def system(w: Walker, base: str, args: list[Arg]) -> None:
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
        for a in positional_args(args, takes_value={"-m", "--mode"}):
            w.write(a, "create", "creates")
            break
        return
    w.add(DESTRUCTIVE, f"{base} changes system configuration")


@handles("systemctl", "service")
def systemctl(w: Walker, base: str, args: list[Arg]) -> None:
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
    w.add(DESTRUCTIVE, f"{base} changes system services")


@handles("crontab")
def crontab(w: Walker, base: str, args: list[Arg]) -> None:
    texts = [a.text for a in args]
    if "-l" in texts:
        return
    if "-r" in texts:
        w.add(DESTRUCTIVE, "crontab -r deletes the user's crontab")
        return
    w.add(UNKNOWN, "crontab installs scheduled commands")


@handles("hostname")
def hostname(w: Walker, base: str, args: list[Arg]) -> None:
    if [a for a in args if not a.text.startswith("-")]:
        w.add(DESTRUCTIVE, "hostname NAME changes the machine's name")


@handles("journalctl")
def journalctl(w: Walker, base: str, args: list[Arg]) -> None:
    if any(a.text.startswith(("--vacuum", "--rotate", "--flush", "--sync", "--relinquish"))
           for a in args):
        w.add(DESTRUCTIVE, "journalctl --vacuum/--rotate changes the system journal")


@handles("ip")
def ip(w: Walker, base: str, args: list[Arg]) -> None:
    words = [a.text for a in args if not a.text.startswith("-")]
    if len(words) <= 1 or words[1] in ("show", "list", "ls", "get") or \
            (len(words) >= 2 and words[0] in ("addr", "a", "route", "r", "link", "l",
                                              "neigh", "n") and words[1] in ("show", "list")):
        return
    w.add(DESTRUCTIVE, "ip changes network configuration")
