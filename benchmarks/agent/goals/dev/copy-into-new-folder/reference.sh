#!/usr/bin/env bash
set -euo pipefail
mkdir -p backup && cp notes/todo.txt backup/todo.txt
printf '{"answer": "Copied notes/todo.txt to backup/todo.txt.", "status": "verified"}\n' > "$1"
