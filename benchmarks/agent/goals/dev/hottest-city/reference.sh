#!/usr/bin/env bash
set -euo pipefail
tail -n +2 weather.csv | sort -t, -k3,3 -g | tail -1 | cut -d, -f1 > hottest.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(cat hottest.txt)" > "$1"
