#!/usr/bin/env bash
# No "discount" column; "discount_pct" and "discount_code" are near matches.
set -euo pipefail
cat > orders.csv <<'X'
order_id,customer,amount,discount_pct,discount_code
1,ann,100.00,10,SPRING
2,bob,50.00,0,
3,cara,80.00,5,LOYAL
4,dan,20.00,15,SPRING
X
