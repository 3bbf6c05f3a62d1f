#!/usr/bin/env bash
set -euo pipefail
total=$(python3 - <<'PY'
import csv
rows = [r for r in csv.DictReader(open("sales.csv", newline="")) if r.get("amount")]
print("%.2f" % sum(float(r["amount"]) for r in rows))
PY
)
printf '{"answer": "The amount column of sales.csv adds up to %s.", "status": "verified"}\n' "$total" > "$1"
