#!/usr/bin/env bash
set -euo pipefail
avg=$(python3 -c 'import json; u = json.load(open("users.json"))["users"]; print(sum(p["age"] for p in u) / len(u))')
printf '{"answer": "The average age is %s.", "status": "verified"}\n' "$avg" > "$1"
