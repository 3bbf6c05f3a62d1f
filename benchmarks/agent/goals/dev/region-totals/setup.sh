#!/usr/bin/env bash
# Regions spelt with stray spaces and capitals: grouping the raw strings splits a region in two.
set -euo pipefail
cat > orders.csv <<'X'
order,region,amount
1,north,10
2,south,5
3,North,20
4,east,7
5,south ,3
6,north,1
7,East,2
X
