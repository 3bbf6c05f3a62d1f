#!/usr/bin/env bash
# A JSON config with defaults and a list of services; "payments" is also a prefix of another
# service's name, and the default level differs.
set -euo pipefail
cat > services.json <<'X'
{
  "defaults": {"log_level": "notice", "replicas": 1},
  "services": [
    {"name": "auth", "log_level": "trace", "replicas": 2},
    {"name": "payments-legacy", "log_level": "critical", "replicas": 1},
    {"name": "payments", "log_level": "debug", "replicas": 3},
    {"name": "search", "replicas": 2}
  ]
}
X
