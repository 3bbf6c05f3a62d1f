"""The layering of DESIGN §2, checked on the code's own imports (ast only, nothing is imported).

Imports run one way: protocol ← runtime ← safety ← roles, and the CLI on top; the memory server
and the auditor use only protocol/ and the runtime, never each other; nothing but the CLI imports
auditor/ or memory_server/. LAYERS below is the one place the allowed arrows are written.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "services", "memory_server", "world_server", "auditor")
MAX_LINES = 700

# layer -> the layers its modules may import (its own layer is always allowed)
LAYERS: dict[str, set[str]] = {
    "protocol": set(),
    "services.runtime": {"protocol"},
    "services.safety": {"protocol", "services.runtime"},
    "services.roles": {"protocol", "services.runtime", "services.safety"},
    "memory_server": {"protocol", "services.runtime"},
    "world_server": {"protocol", "services.runtime"},
    "auditor": {"protocol", "services.runtime"},
    "services.cli": {"protocol", "services.runtime", "services.safety", "services.roles",
                     "memory_server", "world_server", "auditor"},
    "services": set(),                      # the package itself holds no code
}


def layer_of(module: str) -> str | None:
    best = None
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            if best is None or len(layer) > len(best):
                best = layer
    return best


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in the file, at any depth (function-level too)."""
    name, is_package = module_name(path)
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module:
                    out.append((node.lineno, target))
                else:                        # from . import a, b: each name may be a module
                    out += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, node.module))
    return out


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def test_every_module_has_a_layer():
    assert [str(p) for p in sources() if layer_of(module_name(p)[0]) is None] == []


def test_imports_run_one_way():
    forbidden = []
    for path in sources():
        here = layer_of(module_name(path)[0])
        for line, target in imports_of(path):
            if target.split(".")[0] not in PACKAGES:
                continue                     # stdlib and third-party
            there = layer_of(target)
            if there is None and target == "services":
                there = "services"
            if there != here and there not in LAYERS[here]:
                forbidden.append(f"{path.relative_to(REPO)}:{line}: {here} -> {target}")
    assert forbidden == [], "forbidden imports:\n" + "\n".join(forbidden)


def test_the_walker_sees_every_kind_of_import():
    # the checker itself: relative, from-package and function-level imports all resolve
    imports = {t for _, t in imports_of(REPO / "services" / "safety" / "shell.py")}
    assert "services.safety.commands" in imports and "services.safety.levels" in imports
    zygote = [t for _, t in imports_of(REPO / "services" / "roles" / "zygote.py")]
    assert "services.roles.effector" in zygote      # imported inside a function


def test_every_source_folder_is_a_package():
    # setuptools' find (pyproject) installs only folders with an __init__.py
    folders = {p.parent for p in sources()}
    assert sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists()) == []


def test_no_source_file_over_700_lines():
    long = {str(p.relative_to(REPO)): n for p in sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these files (limit {MAX_LINES} lines): {long}"
