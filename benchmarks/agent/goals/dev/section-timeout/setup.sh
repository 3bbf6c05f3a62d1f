#!/usr/bin/env bash
# The key timeout appears in three sections; the first one is not the database's.
set -euo pipefail
cat > settings.ini <<'X'
[http]
host = 0.0.0.0
timeout = 30

[database]
name = shop
; timeout = 5 was too short
timeout = 45
pool = 8

[cache]
timeout = 300
X
