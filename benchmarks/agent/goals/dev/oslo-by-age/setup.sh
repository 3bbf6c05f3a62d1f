#!/usr/bin/env bash
# Ages of one, two and three digits (a text sort puts 9 above 45 and 101 below 45); Bergen rows
# between; one Oslo row spells the city "oslo".
set -euo pipefail
cat > people.csv <<'Y'
name,city,age
Ingrid,Oslo,45
Lars,Bergen,70
Sofie,Oslo,9
Magnus,oslo,101
Nora,Bergen,33
Emil,Oslo,28
Y
