#!/usr/bin/env bash
set -euo pipefail
sed -n 's/^[-*] \[ \] //p' notes/plan.md > todo_left.txt
printf '{"answer": "%s open items written to todo_left.txt", "status": "verified"}\n' "$(wc -l < todo_left.txt)" > "$1"
