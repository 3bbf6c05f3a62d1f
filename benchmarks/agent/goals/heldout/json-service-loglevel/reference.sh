#!/usr/bin/env bash
set -euo pipefail
level=$(python3 -c 'import json; d = json.load(open("services.json")); print(next(s.get("log_level", d["defaults"]["log_level"]) for s in d["services"] if s["name"] == "payments"))')
printf '{"answer": "The payments service logs at level %s.", "status": "verified"}\n' "$level" > "$1"
