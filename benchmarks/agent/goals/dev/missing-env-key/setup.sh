#!/usr/bin/env bash
# An env file with DB_HOST, APP_PORT and REDIS_PORT, but no DB_PORT in any spelling.
set -euo pipefail
cat > settings.env <<'X'
# service settings
APP_NAME=shop
APP_PORT=8000
DB_HOST=db.internal
DB_NAME=shop
DB_USER=shop_app
DB_PASSWORD=change-me
REDIS_HOST=cache.internal
REDIS_PORT=6379
LOG_LEVEL=info
X
cat > settings.env.example <<'X'
APP_NAME=
APP_PORT=
DB_HOST=
DB_NAME=
X
