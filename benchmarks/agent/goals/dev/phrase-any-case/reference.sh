#!/usr/bin/env bash
set -euo pipefail
f=$(grep -ril "project falcon" notes)
printf '{"answer": "%s", "status": "verified"}\n' "$f" > "$1"
