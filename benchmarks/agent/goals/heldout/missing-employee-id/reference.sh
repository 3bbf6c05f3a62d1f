#!/usr/bin/env bash
set -euo pipefail
dept=$(awk -F, '$1 == "E1042" { print $3 }' employees.csv)
if [ -n "$dept" ]; then
  printf '{"answer": "%s", "status": "verified"}\n' "$dept" > "$1"
else
  printf '{"answer": "There is no employee E1042 in employees.csv (closest ids: E1024, E1043, E1402).", "status": "not_possible"}\n' > "$1"
fi
