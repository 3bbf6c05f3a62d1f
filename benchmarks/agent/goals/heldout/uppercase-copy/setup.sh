#!/usr/bin/env bash
# A short memo with mixed case, digits, punctuation and a blank line.
set -euo pipefail
cat > memo.txt <<'X'
Hi team,

The office will be closed on Friday for the move to Building 7.
Please pack your desks by Thursday 5pm and label boxes with your name.

Questions? Ask Maria (ext. 214) or e-mail facilities@corp.example.
Thanks!
X
