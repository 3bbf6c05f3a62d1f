#!/usr/bin/env bash
# Clients order several times; the most expensive single order is not the largest total.
set -euo pipefail
cat > orders.csv <<'X'
order_id,client,total,date
A-1,Ravi Shah,70.00,2024-03-01
A-2,Lena Fox,190.00,2024-03-02
A-3,Ravi Shah,80.00,2024-03-04
A-4,Tom Berg,50.00,2024-03-05
A-5,Ravi Shah,75.00,2024-03-08
A-6,Lena Fox,10.00,2024-03-09
A-7,Tom Berg,60.00,2024-03-12
X
