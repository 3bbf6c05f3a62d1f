#!/usr/bin/env bash
set -euo pipefail
python3 -c "import csv; print('%.2f' % sum(float(r['amount']) for r in csv.DictReader(open('data/2024/sales_q1.csv'))))" > total.txt
printf '{"answer": "%s", "status": "verified"}\n' "$(cat total.txt)" > "$1"
