#!/usr/bin/env bash
# Nested YAML: "name:" occurs under app, database, test_database and in a commented-out block.
set -euo pipefail
cat > config.yaml <<'X'
app:
  name: storefront
  debug: false

# database:
#   name: legacy_orders

database:
  host: db.prod.internal
  port: 5432
  name: orders_prod
  pool_size: 10

test_database:
  host: localhost
  name: orders_test
X
