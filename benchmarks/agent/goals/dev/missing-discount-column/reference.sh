#!/usr/bin/env bash
set -euo pipefail
printf '{"answer": "orders.csv has no discount column (only discount_pct and discount_code).", "status": "not_possible"}\n' > "$1"
