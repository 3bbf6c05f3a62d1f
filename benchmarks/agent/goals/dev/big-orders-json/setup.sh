#!/usr/bin/env bash
# Items are a list per order; quantities are a different thing from the number of items.
set -euo pipefail
cat > orders.json <<'X'
{"shop": "north", "orders": [
  {"id": 1, "items": [{"sku": "a", "qty": 5}, {"sku": "b", "qty": 1}]},
  {"id": 2, "items": [{"sku": "a", "qty": 1}, {"sku": "c", "qty": 1}, {"sku": "d", "qty": 2}]},
  {"id": 3, "items": [{"sku": "e", "qty": 9}]},
  {"id": 4, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1}, {"sku": "c", "qty": 1}, {"sku": "f", "qty": 1}]},
  {"id": 5, "items": []},
  {"id": 6, "items": [{"sku": "g", "qty": 2}, {"sku": "h", "qty": 2}]}
]}
X
