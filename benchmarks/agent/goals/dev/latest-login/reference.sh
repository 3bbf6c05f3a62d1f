#!/usr/bin/env bash
set -euo pipefail
who=$(tail -n +2 logins.csv | sort -t, -k2,2 | tail -1 | cut -d, -f1)
printf '{"answer": "%s", "status": "verified"}\n' "$who" > "$1"
