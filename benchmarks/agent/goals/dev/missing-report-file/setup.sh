#!/usr/bin/env bash
# Reports for 2022 and 2024 and a 2023 summary in a subfolder, but no report_2023.txt anywhere.
set -euo pipefail
mkdir -p reports
for i in $(seq 1 17); do echo "2022 item $i"; done > report_2022.txt
for i in $(seq 1 23); do echo "2024 item $i"; done > report_2024.txt
for i in $(seq 1 9); do echo "2023 summary point $i"; done > reports/summary_2023.txt
printf 'report_2023 was never finished\n' > TODO.txt
