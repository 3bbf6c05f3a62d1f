#!/usr/bin/env bash
set -euo pipefail
python3 -c 'import json; p = max(json.load(open("people.json")), key=lambda p: p["age"]); print("%s,%d" % (p["name"], p["age"]))' > oldest.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(cat oldest.txt)" > "$1"
