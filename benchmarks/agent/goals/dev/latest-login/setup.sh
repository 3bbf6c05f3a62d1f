#!/usr/bin/env bash
# Rows are not in time order; the last row and the latest date on the first row differ.
set -euo pipefail
cat > logins.csv <<'X'
user,login_time
rkhan,2024-03-18 09:12:00
jdoe,2024-03-02 17:45:10
mlopez,2024-03-21 08:03:55
tnguyen,2024-03-21 07:59:01
asmith,2024-02-28 23:59:59
bwhite,2024-03-09 12:00:00
X
