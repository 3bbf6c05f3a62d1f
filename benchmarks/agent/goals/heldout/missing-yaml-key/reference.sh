#!/usr/bin/env bash
set -euo pipefail
if grep -qE '^[[:space:]]*max_connections:' postgres.yaml; then
  printf '{"answer": "%s", "status": "verified"}\n' "$(grep -E '^[[:space:]]*max_connections:' postgres.yaml | awk '{print $2}')" > "$1"
else
  printf '{"answer": "postgres.yaml does not set max_connections; the closest keys are superuser_reserved_connections, max_wal_senders and pool.size.", "status": "not_possible"}\n' > "$1"
fi
