#!/usr/bin/env bash
# Purchases; most customers ordered more than once.
set -euo pipefail
cat > purchases.csv <<'X'
purchase_id,customer,item,qty
1,Ana,pen,3
2,Ben,ink,1
3,Ana,paper,10
4,Chloe,pen,1
5,Ben,pen,2
6,Dev,stapler,1
7,Ana,ink,2
8,Chloe,paper,5
9,Ben,paper,1
X
