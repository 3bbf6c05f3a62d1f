"""Law 0 and Law 1: evidence checking (evidence.py), the Law 1 gate (law1.py: classify, approvals,
undo; the shell walker in shell.py, one module per command family in commands/, path and
protected-root logic in paths.py), the agent's tool set and its workspace confinement (tools.py).
Imports protocol/ and services.runtime only."""
