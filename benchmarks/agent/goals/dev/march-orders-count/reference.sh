#!/usr/bin/env bash
set -euo pipefail
n=$(awk -F, 'NR>1 && substr($2,1,7)=="2024-03"' orders.csv | wc -l)
printf '{"answer": "%s", "status": "verified"}\n' "$n" > "$1"
