#!/usr/bin/env bash
set -euo pipefail
ip=$(awk '$7 == "/login" {print $1}' logs/access.log | sort | uniq -c | sort -k1,1nr | head -1 | awk '{print $2}')
printf '{"answer": "%s", "status": "verified"}\n' "$ip" > "$1"
