"""Law 1 command families: what one program does to its arguments.

Each module here is one family (files, git, archives, ...). A family registers its handlers with
`@handles("name", ...)` for exact program names or `@handles(pattern=re.compile(...))` for a name
pattern; a handler is `handler(walker, base, args)` and reports findings through the walker
(`walker.add`, `walker.read`, `walker.write`, `walker.delete`, `walker.run` for a program it runs).
Importing this package loads every module in it, so adding a command family is adding one module.
A program name belongs to one family only (registering it twice raises at import).
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Callable, Optional

Handler = Callable[..., None]                 # (walker, base: str, args: list[Arg]) -> None

_BY_NAME: dict[str, Handler] = {}
_BY_PATTERN: list[tuple[re.Pattern, Handler]] = []


def handles(*names: str, pattern: Optional[re.Pattern] = None) -> Callable[[Handler], Handler]:
    """Register the decorated function for these program names and/or this name pattern."""
    def register(fn: Handler) -> Handler:
        for name in names:
            if name in _BY_NAME:
                raise RuntimeError(f"Law 1: {name} has two command families "
                                   f"({_BY_NAME[name].__module__}, {fn.__module__})")
            _BY_NAME[name] = fn
        if pattern is not None:
            _BY_PATTERN.append((pattern, fn))
        return fn
    return register


def handler_for(base: str) -> Optional[Handler]:
    """The handler for a program's base name: an exact name first, then the name patterns."""
    handler = _BY_NAME.get(base)
    if handler is not None:
        return handler
    for pattern, fn in _BY_PATTERN:
        if pattern.match(base):
            return fn
    return None


def names() -> dict[str, Handler]:
    return dict(_BY_NAME)


for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
