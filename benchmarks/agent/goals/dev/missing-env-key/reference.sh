#!/usr/bin/env bash
set -euo pipefail
if grep -qi '^db_port=' settings.env; then
  printf '{"answer": "%s", "status": "verified"}\n' "$(grep -i '^db_port=' settings.env | cut -d= -f2)" > "$1"
else
  printf '{"answer": "settings.env does not set db_port (it has DB_HOST, APP_PORT and REDIS_PORT, but no DB_PORT).", "status": "not_possible"}\n' > "$1"
fi
