#!/usr/bin/env bash
set -euo pipefail
n=$(find project -type f -name '*.py' | wc -l)
printf '{"answer": "There are %d Python (.py) files in project/.", "status": "verified"}\n' "$n" > "$1"
