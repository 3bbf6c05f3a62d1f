#!/usr/bin/env bash
set -euo pipefail
n=$(python3 -c "import csv; print(len({r['customer'] for r in csv.DictReader(open('purchases.csv'))}))")
printf '{"answer": "%s different customers.", "status": "verified"}\n' "$n" > "$1"
