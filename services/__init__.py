"""artoo's processes: runtime/ (what every process uses), roles/ (the agent roles), safety/ (Law 1,
tools, workspace confinement) and cli/ (the `artoo` command)."""
