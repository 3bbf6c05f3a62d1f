#!/usr/bin/env bash
set -euo pipefail
awk -F, 'NR>1 && tolower($2)=="oslo" {print $3 "," $1}' people.csv | sort -t, -k1,1 -rn | cut -d, -f2 > oslo.txt
printf '{"answer": "oslo.txt written", "status": "verified"}\n' > "$1"
