#!/usr/bin/env bash
set -euo pipefail
[ -n "$(tail -c 1 members.csv)" ] && printf '\n' >> members.csv
printf 'carol,carol@example.com,editor\n' >> members.csv
printf '{"answer": "Added carol to members.csv.", "status": "verified"}\n' > "$1"
