#!/usr/bin/env bash
# Tickets; the status column spells "closed" in three ways, and "closed" also occurs in titles
# and in the status "not closed".
set -euo pipefail
cat > tickets.csv <<'X'
id,title,status
1,Login fails,closed
2,Closed accounts still billed,open
3,Slow search,Closed
4,Typo on home page,CLOSED
5,Export times out,open
6,Report closed by mistake,in progress
7,Wrong currency,closed
8,Dark mode,not closed
X
