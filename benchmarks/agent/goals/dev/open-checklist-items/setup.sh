#!/usr/bin/env bash
# A markdown checklist: a prose line quotes "- [ ]" (a grep for "[ ]" picks it up), one done item
# is ticked with a capital X, and one open item uses a "*" bullet.
set -euo pipefail
mkdir -p notes
cat > notes/plan.md <<'L'
# Move to the new office

Use `- [ ]` for open items and `- [x]` for done ones.

## Before
- [x] book the movers
- [ ] order boxes
- [X] tell the landlord

## Moving day
- [ ] label the cables
- [ ] take meter readings
- [x] pack the kitchen

## Later
* [ ] update the address at the bank
L
printf '# Ideas\n\n- [ ] plant on the balcony\n' > notes/ideas.md
