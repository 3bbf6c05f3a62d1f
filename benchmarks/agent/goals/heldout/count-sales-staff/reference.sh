#!/usr/bin/env bash
set -euo pipefail
n=$(awk -F, '$3 == "Sales"' staff.csv | wc -l)
printf '{"answer": "%d employees are in Sales.", "status": "verified"}\n' "$n" > "$1"
