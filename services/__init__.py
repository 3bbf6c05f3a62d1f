"""artoo role processes, the bus proxy, the effector spawner, the LLM client, the tools and the CLI."""
__version__ = "0.1.0"
