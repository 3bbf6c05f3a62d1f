#!/usr/bin/env bash
set -euo pipefail
f=$(grep -rlE '^[[:space:]]*(export[[:space:]]+)?TIMEOUT=' tools)
printf '{"answer": "%s assigns TIMEOUT.", "status": "verified"}\n' "$f" > "$1"
