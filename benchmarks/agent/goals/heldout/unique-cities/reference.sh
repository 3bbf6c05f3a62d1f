#!/usr/bin/env bash
set -euo pipefail
python3 -c 'import csv; print("\n".join(sorted({r["city"] for r in csv.DictReader(open("customers.csv", newline=""))})))' > cities.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(paste -sd, cities.txt)" > "$1"
