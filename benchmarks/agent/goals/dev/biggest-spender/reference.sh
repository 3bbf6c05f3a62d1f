#!/usr/bin/env bash
set -euo pipefail
who=$(python3 -c '
import csv, collections
t = collections.Counter()
for r in csv.DictReader(open("payments.csv")):
    t[r["customer"]] += float(r["amount"])
print(t.most_common(1)[0][0])')
printf '{"answer": "%s spent the most.", "status": "verified"}\n' "$who" > "$1"
