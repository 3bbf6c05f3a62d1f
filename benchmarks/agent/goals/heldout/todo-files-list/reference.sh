#!/usr/bin/env bash
set -euo pipefail
grep -rl 'TODO' src | xargs -n1 basename | LC_ALL=C sort > todo_files.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(paste -sd' ' todo_files.txt)" > "$1"
