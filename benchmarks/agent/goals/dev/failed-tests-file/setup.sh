#!/usr/bin/env bash
# Result is the 4th field; a test name and a message also contain "fail" in other cases.
set -euo pipefail
cat > build.log <<'X'
2024-05-01 10:00:01 test_login PASS 1.2s
2024-05-01 10:00:03 test_failover PASS 3.4s
2024-05-01 10:00:04 test_checkout FAIL 0.8s
2024-05-01 10:00:06 test_search PASS 2.0s
2024-05-01 10:00:07 test_upload FAIL 5.1s
2024-05-01 10:00:09 test_retry_on_FAIL PASS 0.4s
2024-05-01 10:00:10 test_logout FAIL 0.3s
X
