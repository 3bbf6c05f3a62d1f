#!/usr/bin/env bash
set -euo pipefail
best=$(for f in exports/*.csv; do printf '%d %s\n' "$(tail -n +2 "$f" | grep -c .)" "$f"; done | sort -n | tail -1 | cut -d' ' -f2)
printf '{"answer": "%s has the most data rows.", "status": "verified"}\n' "$best" > "$1"
