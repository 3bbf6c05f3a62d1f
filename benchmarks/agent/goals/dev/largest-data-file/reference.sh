#!/usr/bin/env bash
set -euo pipefail
biggest=$(find data -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
printf '{"answer": "The biggest file is %s.", "status": "verified"}\n' "$biggest" > "$1"
