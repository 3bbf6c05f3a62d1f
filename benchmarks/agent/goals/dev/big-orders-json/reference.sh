#!/usr/bin/env bash
set -euo pipefail
n=$(python3 -c 'import json; print(sum(len(o["items"]) > 2 for o in json.load(open("orders.json"))["orders"]))')
printf '{"answer": "%s", "status": "verified"}\n' "$n" > "$1"
