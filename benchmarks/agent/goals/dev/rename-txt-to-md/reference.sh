#!/usr/bin/env bash
set -euo pipefail
for f in drafts/*.txt; do mv -- "$f" "${f%.txt}.md"; done
printf '{"answer": "Renamed the .txt files in drafts/ to .md.", "status": "verified"}\n' > "$1"
