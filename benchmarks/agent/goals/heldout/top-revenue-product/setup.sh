#!/usr/bin/env bash
# Quarterly sales: the top revenue has five digits, so a text sort picks a four-digit one; the
# product with the most units is another; a blank line, and a TOTAL row
# at the end that is not a product.
set -euo pipefail
cat > q3.csv <<'X'
product,units,revenue
Desk lamp,410,9840.00
Office chair,95,14250.50
Monitor arm,120,8990.00
Standing desk,31,12400.00

Cable tray,640,3200.00
Footrest,88,2640.00
TOTAL,1384,51320.50
X
