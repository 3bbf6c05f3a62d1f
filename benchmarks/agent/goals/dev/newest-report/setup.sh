#!/usr/bin/env bash
# Modification times do not follow the names: by name report_9 sorts last (text) and report_12
# highest (number); the newest by time is report_10.
set -euo pipefail
mkdir -p reports
for n in 1 2 9 10 12; do echo "report $n" > "reports/report_$n.txt"; done
touch -d '2024-01-05 09:00' reports/report_1.txt
touch -d '2024-02-11 09:00' reports/report_2.txt
touch -d '2024-03-02 09:00' reports/report_9.txt
touch -d '2024-06-20 09:00' reports/report_10.txt
touch -d '2024-04-15 09:00' reports/report_12.txt
