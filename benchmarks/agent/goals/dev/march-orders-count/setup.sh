#!/usr/bin/env bash
# ISO dates: 4 orders in 2024-03; 2 in March 2023 (a search for "-03-" finds 6); days "03" in
# other months (a search for "03" finds more).
set -euo pipefail
cat > orders.csv <<'Y'
order_id,date,customer,total
1001,2023-03-14,acme,120.00
1002,2023-03-29,bolt,75.50
1003,2024-01-03,acme,60.00
1004,2024-02-28,cora,210.00
1005,2024-03-01,bolt,99.90
1006,2024-03-03,dune,15.00
1007,2024-03-17,acme,48.25
1008,2024-03-31,cora,300.00
1009,2024-04-01,dune,12.00
1010,2024-04-03,bolt,80.00
Y
