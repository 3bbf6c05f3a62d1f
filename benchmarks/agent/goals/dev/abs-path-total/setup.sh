#!/usr/bin/env bash
# The csv is in a subfolder; a quoted customer name holds a comma (a naive split shifts it).
set -euo pipefail
mkdir -p data/2024
cat > data/2024/sales_q1.csv <<'X'
id,customer,amount
1,"Acme, Inc.",120.50
2,Globex,80.00
3,Initech,49.50
X
printf 'amounts are in EUR\n' > data/README.txt
