#!/usr/bin/env bash
set -euo pipefail
n=$(awk '$3 == "[ERROR]"' logs/app.log | wc -l)
printf '{"answer": "logs/app.log has %d ERROR-level entries.", "status": "verified"}\n' "$n" > "$1"
