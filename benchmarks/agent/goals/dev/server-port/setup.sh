#!/usr/bin/env bash
# An ini file where "port" appears in three sections and once commented out.
set -euo pipefail
mkdir -p config
cat > config/app.ini <<'X'
; Application configuration
; edit with care, the deploy script reads this file

[database]
host = db.internal
port = 5432
name = shop
user = shop_app

[server]
host = 0.0.0.0
; port = 80   (before the reverse proxy was added)
port = 8080
workers = 4
timeout = 30

[cache]
host = 127.0.0.1
port = 6379
ttl = 300
X
cat > config/logging.ini <<'X'
[handlers]
keys = console

[handler_console]
level = INFO
X
