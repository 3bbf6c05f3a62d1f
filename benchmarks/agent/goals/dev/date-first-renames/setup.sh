#!/usr/bin/env bash
# Four dated CSVs to rename; one prefix has a dash of its own (cost-centres), so splitting the
# name at the first dash goes wrong. An undated CSV and a dated .txt must stay as they are.
set -euo pipefail
mkdir -p reports
printf 'region,amount\nnorth,1200\nsouth,950\n' > reports/sales-2024-01.csv
printf 'region,amount\nnorth,1310\nsouth,880\n' > reports/sales-2024-02.csv
printf 'item,amount\nrent,2000\npower,310\n' > reports/costs-2024-02.csv
printf 'centre,amount\nHQ,5400\nLab,2100\n' > reports/cost-centres-2024-01.csv
printf 'month,sales,costs\n2024-01,2150,2310\n2024-02,2190,2310\n' > reports/summary.csv
printf 'January was slow because of the holidays.\n' > reports/notes-2024-01.txt
