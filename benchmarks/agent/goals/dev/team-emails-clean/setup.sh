#!/usr/bin/env bash
# The "team file" is team.csv; one address appears twice in different cases.
set -euo pipefail
cat > team.csv <<'X'
name,email,role
Ann,Ann@Example.com,lead
Bob,bob@example.com,dev
Cy,cy@example.org,dev
Ann B,ann@example.com,ops
X
printf 'see team.csv\n' > notes.txt
