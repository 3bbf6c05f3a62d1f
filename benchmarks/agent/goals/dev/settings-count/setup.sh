#!/usr/bin/env bash
# Comments start with # (some indented); blank lines; 7 settings among 13 lines.
set -euo pipefail
cat > app.conf <<'X'
# app.conf
name=shop
port=8080

# logging
log_level=info
  # log_file=/var/log/shop.log
log_rotate=7

workers=4
# workers=8
cache_ttl=600
debug=false
X
