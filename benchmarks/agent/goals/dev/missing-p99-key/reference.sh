#!/usr/bin/env bash
set -euo pipefail
if python3 -c 'import json, sys; d = json.load(open("stats/metrics.json")); sys.exit(0 if any(k.startswith("latency_p99") for e in d["endpoints"] for k in e) else 1)'; then
  printf '{"answer": "?", "status": "verified"}\n' > "$1"
else
  printf '{"answer": "stats/metrics.json records only p50 and p95 latencies per endpoint (and a p99 target), no recorded p99 latency.", "status": "not_possible"}\n' > "$1"
fi
