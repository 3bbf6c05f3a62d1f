#!/usr/bin/env bash
set -euo pipefail
n=$(python3 -c "import csv; print(sum(r['status'].strip().lower() == 'closed' for r in csv.DictReader(open('tickets.csv'))))")
printf '{"answer": "%s tickets are closed.", "status": "verified"}\n' "$n" > "$1"
