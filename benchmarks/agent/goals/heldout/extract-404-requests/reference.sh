#!/usr/bin/env bash
set -euo pipefail
awk '$9 == "404"' access.log > not_found.log
printf '{"answer": "Saved %d requests with status 404 to not_found.log.", "status": "verified"}\n' "$(wc -l < not_found.log)" > "$1"
