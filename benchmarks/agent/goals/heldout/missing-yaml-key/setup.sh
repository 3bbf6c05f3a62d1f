#!/usr/bin/env bash
# A database config with several max_* and *connections keys, but no max_connections.
set -euo pipefail
cat > postgres.yaml <<'X'
server:
  listen_addresses: "*"
  port: 5433
  superuser_reserved_connections: 3
  max_wal_senders: 10
pool:
  size: 20
  max_lifetime_s: 300
  max_idle: 4
logging:
  log_connections: true
X
