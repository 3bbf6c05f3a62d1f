#!/usr/bin/env bash
# An application log; the word ERROR also appears inside the messages of INFO, WARN and DEBUG
# entries, and "error" in lower case elsewhere, so a plain grep over-counts.
set -euo pipefail
mkdir -p logs
cat > logs/app.log <<'X'
2024-03-01 09:00:01 [INFO] service starting, version 2.4.1
2024-03-01 09:00:02 [INFO] loaded 14 routes
2024-03-01 09:00:02 [DEBUG] config: log_level=INFO alert_on=ERROR
2024-03-01 09:00:05 [INFO] connected to database
2024-03-01 09:01:10 [WARN] slow query took 2.3s
2024-03-01 09:01:44 [ERROR] payment gateway timeout for order 5512
2024-03-01 09:01:45 [INFO] retrying order 5512 after ERROR from gateway
2024-03-01 09:01:47 [INFO] order 5512 paid
2024-03-01 09:02:00 [DEBUG] cache hit ratio 0.93
2024-03-01 09:03:12 [ERROR] could not render template invoice.html
2024-03-01 09:03:13 [WARN] falling back to plain-text invoice after error
2024-03-01 09:04:00 [INFO] 120 requests served, 0 errors
2024-03-01 09:05:31 [INFO] user 77 logged in
2024-03-01 09:06:02 [ERROR] database connection lost
2024-03-01 09:06:03 [INFO] reconnecting to database
2024-03-01 09:06:04 [INFO] reconnected
2024-03-01 09:07:15 [WARN] disk usage at 81%
2024-03-01 09:08:00 [DEBUG] ERROR counter reset
2024-03-01 09:09:40 [INFO] nightly report queued
2024-03-01 09:10:11 [ERROR] report job failed: missing column "total"
2024-03-01 09:10:12 [INFO] report job will retry
2024-03-01 09:11:00 [INFO] health check ok
2024-03-01 09:12:30 [WARN] ERROR rate above 1% in the last 10 minutes
2024-03-01 09:13:00 [INFO] health check ok
2024-03-01 09:14:05 [ERROR] upstream returned 502
2024-03-01 09:14:06 [INFO] user 91 logged out
2024-03-01 09:15:00 [INFO] 240 requests served, 5 errors
X
cat > logs/old.log <<'X'
2024-02-28 23:59:58 [ERROR] disk full
2024-02-28 23:59:59 [INFO] shutting down
X
