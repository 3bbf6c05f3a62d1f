#!/usr/bin/env bash
# email comes before name in the source, and a team name holds a comma.
set -euo pipefail
cat > staff.csv <<'X'
id,email,team,name
1,ana@example.com,"Sales, EMEA",Ana Lima
2,ben@example.com,Support,Ben Ode
3,chloe@example.com,"R&D, Labs",Chloe Park
X
