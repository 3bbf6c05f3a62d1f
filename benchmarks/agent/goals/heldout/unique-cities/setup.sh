#!/usr/bin/env bash
# Customers with repeated cities; the quoted address field contains commas, so the city is not
# the fourth comma-separated field on those rows.
set -euo pipefail
cat > customers.csv <<'X'
id,name,address,city,country
1,Anna Berg,"Storgata 5, 2nd floor",Oslo,NO
2,Luca Neri,Via Roma 12,Madrid,ES
3,Eva Novak,"Hauptstrasse 3, Hof 2",Vienna,AT
4,João Reis,Rua Augusta 90,Lisbon,PT
5,Tim Vogel,"Unter den Linden 1, Apt 4",Berlin,DE
6,Ida Lund,Karl Johans gate 7,Oslo,NO
7,Paul Martin,"12 rue de Rivoli, bât. B",Paris,FR
8,Ines Soto,Gran Via 40,Madrid,ES
9,Max Huber,Ringstrasse 8,Vienna,AT
10,Lea Roux,Rue Oberkampf 3,Paris,FR
X
