#!/usr/bin/env bash
# A plain `cp notes/todo.txt backup/todo.txt` fails: backup/ does not exist.
set -euo pipefail
mkdir -p notes
printf 'buy milk\ncall the bank\nfix the bike\n' > notes/todo.txt
printf 'nothing yet\n' > notes/ideas.txt
