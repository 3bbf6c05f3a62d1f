#!/usr/bin/env bash
# Products have a ratings_count column (how many ratings), but no rating column.
set -euo pipefail
cat > products.csv <<'X'
sku,name,price,ratings_count
P-01,Kettle,29.90,120
P-02,Toaster,24.50,86
P-03,Blender,59.00,240
P-04,Coffee grinder,39.99,18
P-05,Hand mixer,19.95,51
P-06,Rice cooker,44.00,0
X
