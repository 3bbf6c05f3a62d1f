#!/usr/bin/env bash
# Timestamps carry a time part; "failed" also occurs in a successful line's message.
set -euo pipefail
cat > auth.log <<'X'
2024-05-01T09:12:03 LOGIN_OK user=ana
2024-05-01T22:40:11 LOGIN_FAILED user=ben
2024-05-02T07:05:59 LOGIN_OK user=ben note="after 1 failed attempt"
2024-05-03T13:00:00 LOGIN_FAILED user=dev
2024-05-03T13:00:09 LOGIN_FAILED user=dev
2024-05-04T18:30:45 LOGIN_OK user=chloe
X
