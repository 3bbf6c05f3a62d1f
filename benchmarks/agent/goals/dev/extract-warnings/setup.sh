#!/usr/bin/env bash
# Server log; "WARNING" and "warning" also occur in the messages of other levels.
set -euo pipefail
cat > server.log <<'X'
2024-05-02T08:00:01 INFO server started on :8080
2024-05-02T08:00:01 INFO log level set to WARNING for module cache
2024-05-02T08:00:07 WARNING disk usage at 81% on /var
2024-05-02T08:01:15 INFO GET /health 200
2024-05-02T08:01:20 ERROR failed to send mail: connection refused (previous WARNING ignored)
2024-05-02T08:02:00 WARNING certificate expires in 20 days
2024-05-02T08:02:30 DEBUG warning threshold is 80%
2024-05-02T08:03:41 INFO GET /orders 200
2024-05-02T08:04:02 WARNING slow response from inventory service (2.4s)
2024-05-02T08:05:10 INFO user admin changed setting warnings_enabled=true

2024-05-02T08:06:00 WARNING retrying job 42 (attempt 2 of 3)
2024-05-02T08:06:30 INFO job 42 finished
2024-05-02T08:07:45 CRITICAL out of memory in worker 3
2024-05-02T08:08:00 WARNING  worker 3 restarted
2024-05-02T08:09:12 INFO GET /health 200
X
