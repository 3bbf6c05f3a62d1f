"""Package managers (install, remove, read-only queries) and container/cluster tools
(docker, podman, kubectl, docker-compose)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..levels import DESTRUCTIVE, UNKNOWN
from ..words import Arg
from . import handles

if TYPE_CHECKING:
    from ..shell import Walker


PACKAGE_MANAGERS = frozenset({"apt", "apt-get", "aptitude", "yum", "dnf", "zypper", "pacman",
                              "apk", "brew", "port", "snap", "flatpak", "pip", "pip3", "npm",
                              "yarn", "pnpm", "cargo-install", "gem", "conda", "mamba",
                              "micromamba",
                              "nix-env", "pipenv", "composer", "bundle", "go-get"})
PM_READ = frozenset({"list", "ls", "show", "info", "search", "freeze", "check", "view", "outdated",
                     "config", "--version", "-v", "-V", "version", "help", "--help", "doctor",
                     "why", "explain", "audit", "policy", "madison", "depends", "rdepends",
                     "query", "-Q", "-Qi", "-Ql", "-Ss", "-Si", "whatprovides", "leaves", "deps",
                     "env", "inspect", "download-info", "cache-list", "list-installed"})
PM_REMOVE = frozenset({"remove", "uninstall", "purge", "autoremove", "erase", "rm", "-R", "-Rs",
                       "-Rns", "clean", "prune", "unlink", "cleanup", "-r", "delete"})
CONTAINER_READ = frozenset({"ps", "images", "image", "inspect", "logs", "version", "info", "top",
                            "stats", "port", "history", "diff", "search", "get", "describe",
                            "explain", "api-resources", "cluster-info", "events", "ls", "list"})
CONTAINER_DESTROY = frozenset({"rm", "rmi", "prune", "kill", "stop", "down", "delete", "drain",
                               "destroy", "system", "volume", "network", "scale", "rollout"})


@handles(*PACKAGE_MANAGERS)
def package_manager(w: Walker, base: str, args: list[Arg]) -> None:
    words = [a.text for a in args if not a.text.startswith("-") or a.text in PM_READ
             or a.text in PM_REMOVE]
    if not words:
        if base in ("pip", "pip3", "npm", "yarn", "pnpm", "brew", "gem", "conda"):
            return
        w.add(UNKNOWN, f"{base}: effect not classified")
        return
    action = words[0]
    if action in PM_READ:
        return
    if action in PM_REMOVE:
        w.add(DESTRUCTIVE, f"{base} {action} removes installed software")
        return
    w.add(UNKNOWN, f"{base} {action} installs or changes software")


@handles("docker", "podman", "kubectl", "docker-compose")
def containers(w: Walker, base: str, args: list[Arg]) -> None:
    words = [a.text for a in args if not a.text.startswith("-")]
    if not words or words[0] in CONTAINER_READ or (len(words) > 1 and words[0] in
                                                     ("container", "image", "volume",
                                                      "network") and words[1] in
                                                     ("ls", "list", "inspect")):
        return
    if words[0] in CONTAINER_DESTROY or (len(words) > 1 and words[1] in CONTAINER_DESTROY):
        w.add(DESTRUCTIVE, f"{base} {words[0]} removes or stops containers/resources")
        return
    w.add(UNKNOWN, f"{base} {words[0]}: effect not classified")
