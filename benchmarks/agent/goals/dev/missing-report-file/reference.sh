#!/usr/bin/env bash
set -euo pipefail
if [ -f report_2023.txt ]; then
  printf '{"answer": "%d", "status": "verified"}\n' "$(wc -l < report_2023.txt)" > "$1"
else
  printf '{"answer": "There is no file report_2023.txt (only report_2022.txt and report_2024.txt exist).", "status": "not_possible"}\n' > "$1"
fi
