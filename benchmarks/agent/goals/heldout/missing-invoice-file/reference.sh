#!/usr/bin/env bash
set -euo pipefail
if [ -f invoices/2023-03.csv ]; then
  printf '{"answer": "%s", "status": "verified"}\n' "$(awk -F, 'NR > 1 { s += $2 } END { printf "%.2f", s }' invoices/2023-03.csv)" > "$1"
else
  printf '{"answer": "invoices/2023-03.csv does not exist (there are invoices for 2023-02, 2023-04 and 2022-03).", "status": "not_possible"}\n' > "$1"
fi
