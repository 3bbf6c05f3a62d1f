#!/usr/bin/env bash
# "200" also appears in durations (200ms, 2000ms) and in a path (/api/items/200), so a plain
# grep 200 picks up other lines; a 201 is a success but not a 200.
set -euo pipefail
mkdir -p logs
cat > logs/api.log <<'L'
2024-06-01T10:00:01Z GET /api/users 200 120ms
2024-06-01T10:00:02Z GET /api/orders 500 2000ms
2024-06-01T10:00:03Z POST /api/orders 201 200ms
2024-06-01T10:00:04Z GET /api/users 200 80ms
2024-06-01T10:00:05Z GET /api/items/200 404 15ms
2024-06-01T10:00:06Z GET /api/orders 200 310ms
2024-06-01T10:00:07Z GET /api/users 304 5ms
2024-06-01T10:00:08Z GET /api/orders 200 97ms
2024-06-01T10:00:09Z DELETE /api/orders/7 204 44ms
2024-06-01T10:00:10Z GET /api/items 200 64ms
L
