#!/usr/bin/env bash
set -euo pipefail
find data -type f -name '*.csv' | wc -l > csv_count.txt
printf '{"answer": "%s .csv files; written to csv_count.txt.", "status": "verified"}\n' "$(cat csv_count.txt)" > "$1"
