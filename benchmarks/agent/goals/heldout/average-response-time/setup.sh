#!/usr/bin/env bash
# Request timings with blank lines in the middle and at the end (an average over all lines
# divides by too many); response_ms is not the last column.
set -euo pipefail
cat > requests.csv <<'X'
time,endpoint,response_ms,status
10:00:01,/api/items,120,200
10:00:02,/api/items,95,200
10:00:04,/api/cart,310,200

10:00:05,/api/cart,280,500
10:00:09,/api/login,45,200
10:00:10,/api/items,150,200
10:00:12,/api/search,620,200

10:00:15,/api/items,88,304
10:00:18,/api/checkout,402,200
10:00:20,/api/login,46,401
10:00:21,/api/search,550,200

X
