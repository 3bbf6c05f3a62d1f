#!/usr/bin/env bash
set -euo pipefail
tail -n +2 inventory.csv > inventory_noheader.csv
printf '{"answer": "inventory_noheader.csv holds the %d data rows.", "status": "verified"}\n' "$(wc -l < inventory_noheader.csv)" > "$1"
