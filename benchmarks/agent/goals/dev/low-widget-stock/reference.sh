#!/usr/bin/env bash
set -euo pipefail
w=$(awk -F, 'NR>1 && $2=="widgets"' inventory/stock.csv | sort -t, -k3,3n | head -1 | cut -d, -f1)
printf '{"answer": "%s", "status": "verified"}\n' "$w" > "$1"
