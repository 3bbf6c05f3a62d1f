#!/usr/bin/env bash
set -euo pipefail
python3 -c 'import csv; print(sum(r["status"] == "shipped" for r in csv.DictReader(open("orders.csv", newline=""))))' > shipped_count.txt
printf '{"answer": "%s orders are shipped; written to shipped_count.txt.", "status": "verified"}\n' "$(cat shipped_count.txt)" > "$1"
