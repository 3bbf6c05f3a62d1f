#!/usr/bin/env bash
# Repeats that are not adjacent (uniq misses them) and an order that sorting destroys.
set -euo pipefail
cat > guests.txt <<'X'
Zoe
Adam
Mia
Adam
Liam
Zoe
Emma
Mia
X
