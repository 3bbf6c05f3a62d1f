#!/usr/bin/env bash
set -euo pipefail
for f in reports/*-[0-9][0-9][0-9][0-9]-[0-9][0-9].csv; do
  base=$(basename "$f" .csv)
  date=${base: -7}
  prefix=${base%-"$date"}
  mv -- "$f" "reports/$date-$prefix.csv"
done
printf '{"answer": "Renamed the four dated reports to date-first names.", "status": "verified"}\n' > "$1"
