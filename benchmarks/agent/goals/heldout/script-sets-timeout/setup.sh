#!/usr/bin/env bash
# Shell scripts: TIMEOUT appears as part of longer variable names, in a comment, as the timeout
# command, and is assigned in exactly one script (in a subfolder).
set -euo pipefail
mkdir -p tools/lib tools/net
cat > tools/backup.sh <<'X'
#!/bin/sh
TIMEOUT_MS=5000
tar czf /tmp/backup.tgz "$HOME/data"
X
cat > tools/deploy.sh <<'X'
#!/bin/sh
# TIMEOUT is read from the environment by the deploy tool
deploy --wait "${TIMEOUT:-60}"
X
cat > tools/check.sh <<'X'
#!/bin/sh
timeout 10 curl -fsS http://localhost:8080/health
X
cat > tools/lib/common.sh <<'X'
export CONNECT_TIMEOUT=5
retry() { "$@" || "$@"; }
X
cat > tools/net/sync.sh <<'X'
#!/bin/sh
. ../lib/common.sh
TIMEOUT=30
rsync --timeout="$TIMEOUT" -a src/ dest/
X
