#!/usr/bin/env bash
set -euo pipefail
printf '%s\n' '{"answer": "Priya Raman has 2 open issues.", "status": "verified"}' > "$1"
