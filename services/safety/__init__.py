"""Law 0 and Law 1: evidence checking, the command gate, tools and undo."""
