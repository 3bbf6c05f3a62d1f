"""`python -m services.cli`: the same command as the `artoo` console script."""
from services.cli import main

main(prog_name="artoo")
