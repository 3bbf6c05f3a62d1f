#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("staff.csv", newline="")))
with open("staff_contacts.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["name", "email"])
    w.writerows([r["name"], r["email"]] for r in rows)
PY
printf '{"answer": "Wrote staff_contacts.csv.", "status": "verified"}\n' > "$1"
