#!/usr/bin/env bash
set -euo pipefail
f=$(grep -rl 'quarterly budget' docs)
printf '{"answer": "The phrase is in %s.", "status": "verified"}\n' "$f" > "$1"
