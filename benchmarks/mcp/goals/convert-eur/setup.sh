#!/usr/bin/env bash
# Nothing in the workspace answers the goal: only the MCP server knows.
set -euo pipefail
printf "shopping list\n" > notes.txt
