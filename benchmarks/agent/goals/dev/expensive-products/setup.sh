#!/usr/bin/env bash
# Prices of different lengths: compared as text, "100.00" < "20" and "3.50" > "20".
set -euo pipefail
cat > catalog.csv <<'X'
sku,name,price
A1,desk lamp,35.00
A2,pencil,3.50
A3,office chair,100.00
A4,notebook,4.25
A5,monitor arm,20.00
A6,keyboard,21.99
A7,mouse pad,9.00
X
