#!/usr/bin/env bash
set -euo pipefail
if awk -F, 'NR > 1 && $1 == "alice" { found = 1 } END { exit !found }' accounts.csv; then
  printf '{"answer": "%s", "status": "verified"}\n' "$(awk -F, '$1 == "alice" { print $3 }' accounts.csv)" > "$1"
else
  printf '{"answer": "There is no user named alice in accounts.csv (the usernames are alicia, alison, bob, malice_bot, chen, dora).", "status": "not_possible"}\n' > "$1"
fi
