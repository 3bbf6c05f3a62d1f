#!/usr/bin/env bash
# Three CSVs to move; a .csv.txt and a README that stay; a CSV in a subfolder of inbox stays too.
set -euo pipefail
mkdir -p inbox/old
printf 'id,v\n1,a\n' > inbox/jan.csv
printf 'id,v\n2,b\n' > inbox/feb.csv
printf 'id,v\n3,c\n' > inbox/mar.csv
printf 'not a csv\n' > inbox/notes.csv.txt
printf 'read me\n' > inbox/README
printf 'id,v\n0,z\n' > inbox/old/dec.csv
