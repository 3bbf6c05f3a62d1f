#!/usr/bin/env bash
# Orders; "shipped" also occurs in the free-text note column and in other statuses' wording.
set -euo pipefail
cat > orders.csv <<'X'
order_id,customer,status,note
7001,Northwind,shipped,
7002,Globex,pending,customer asked if it shipped yet
7003,Initech,shipped,left at reception
7004,Umbrella,cancelled,
7005,Hooli,shipped,
7006,Soylent,returned,was shipped to the wrong address
7007,Acme,pending,
7008,Tyrell,shipped,"fragile, shipped in two boxes"
7009,Wayne,pending,to be shipped Monday
7010,Stark,not_shipped,stock missing
7011,Cyberdyne,shipped,
7012,Gringotts,cancelled,duplicate of 7011
X
