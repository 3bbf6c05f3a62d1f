#!/usr/bin/env bash
set -euo pipefail
find logs -type f -name '*.log' -size +1024c -printf '%f\n' | LC_ALL=C sort > big_logs.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(paste -sd' ' big_logs.txt)" > "$1"
