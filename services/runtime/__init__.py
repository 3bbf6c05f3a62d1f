"""What every artoo process uses: the role runner, the LLM client and local model server, the bus
proxy and its capture link, the daemon, per-task logs and state, MKCT tag helpers.
Imports only protocol/."""
__version__ = "0.1.0"
