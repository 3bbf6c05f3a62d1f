#!/usr/bin/env bash
# The endpoints record latency_p50_ms and latency_p95_ms but no p99; "p99" only appears as the
# SLO target (p99_target_ms), which a grep for p99 finds.
set -euo pipefail
mkdir -p stats
cat > stats/metrics.json <<'L'
{
  "window": "2024-06-01/2024-06-07",
  "slo": {"p99_target_ms": 500},
  "endpoints": [
    {"path": "/api/users", "requests": 18211, "latency_p50_ms": 42, "latency_p95_ms": 181},
    {"path": "/api/orders", "requests": 9120, "latency_p50_ms": 67, "latency_p95_ms": 412},
    {"path": "/api/search", "requests": 30455, "latency_p50_ms": 88, "latency_p95_ms": 356},
    {"path": "/api/items", "requests": 12007, "latency_p50_ms": 35, "latency_p95_ms": 149}
  ]
}
L
