#!/usr/bin/env bash
set -euo pipefail
who=$(python3 -c '
import csv
rows = list(csv.DictReader(open("orders.csv")))
print(max(rows, key=lambda r: float(r["total"]))["client"])')
printf '{"answer": "%s placed the most expensive single order.", "status": "verified"}\n' "$who" > "$1"
