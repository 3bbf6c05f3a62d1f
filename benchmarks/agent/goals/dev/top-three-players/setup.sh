#!/usr/bin/env bash
# Scores of one, two and three digits: sorted as text, 9 beats 120.
set -euo pipefail
cat > results.csv <<'X'
player,score
Kim,87
Lou,120
Max,9
Nia,101
Oto,95
Pia,8
X
