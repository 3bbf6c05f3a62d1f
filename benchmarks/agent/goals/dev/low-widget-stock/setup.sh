#!/usr/bin/env bash
# One row per warehouse and item: lower counts of other items (Leeds has 2 widgets-xl, Dover 3
# gears), so the minimum over all rows, or over every item starting with "widgets", is not it.
set -euo pipefail
mkdir -p inventory
cat > inventory/stock.csv <<'Y'
warehouse,item,units
Austin,widgets,4
Austin,gears,120
Dover,widgets,35
Dover,gears,3
Leeds,widgets-xl,2
Leeds,widgets,10
Oslo,widgets,9
Oslo,bolts,500
Y
