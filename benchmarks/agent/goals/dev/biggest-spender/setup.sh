#!/usr/bin/env bash
# Customers pay several times; the single largest payment is not the largest total.
set -euo pipefail
cat > payments.csv <<'X'
date,customer,amount
2024-02-01,Hannah Weber,40.00
2024-02-03,Oskar Lind,95.50
2024-02-04,Hannah Weber,35.25
2024-02-07,Mia Costa,20.00
2024-02-09,Hannah Weber,30.00
2024-02-11,Mia Costa,60.00
2024-02-15,Oskar Lind,4.75
2024-02-18,Mia Costa,12.50
X
