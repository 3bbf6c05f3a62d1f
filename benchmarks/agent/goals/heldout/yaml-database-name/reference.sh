#!/usr/bin/env bash
set -euo pipefail
name=$(awk '/^[^ #]/ { section = $1 } section == "database:" && $1 == "name:" { print $2 }' config.yaml)
printf '{"answer": "The database section sets name: %s.", "status": "verified"}\n' "$name" > "$1"
