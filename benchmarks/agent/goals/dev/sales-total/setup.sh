#!/usr/bin/env bash
# Sales rows; some customer names are quoted and contain commas, so a naive comma split shifts
# the amount column on those rows. Ends with blank lines.
set -euo pipefail
cat > sales.csv <<'X'
id,customer,amount,region
1001,Northwind,120.50,west
1002,"Acme, Inc.",310.00,east
1003,Globex,75.25,east
1004,Initech,42.00,south
1005,"Smith, Jones & Co",199.99,west
1006,Umbrella,18.75,north
1007,Hooli,260.00,west
1008,"Stark, Ltd",88.40,south
1009,Wayne Enterprises,505.10,east
1010,Soylent,12.01,north
1011,Cyberdyne,230.00,west
1012,"Wonka, Willy",64.50,south
1013,Tyrell,149.50,east
1014,Massive Dynamic,33.00,north

X
printf '\n' >> sales.csv
