#!/usr/bin/env bash
# Several readings per city with negative and one-digit temperatures: a text sort ranks "9.5"
# above "31.2"; the last and first rows are other cities.
set -euo pipefail
cat > weather.csv <<'X'
city,date,temp_c
Oslo,2023-07-01,18.4
Madrid,2023-07-01,29.8
Cairo,2023-07-01,30.9
Reykjavik,2023-07-01,9.5
Oslo,2023-07-02,21.0
Madrid,2023-07-02,31.2
Cairo,2023-07-02,30.1
Reykjavik,2023-07-02,-1.5
Seville,2023-07-02,27.0
Oslo,2023-07-03,16.9
Madrid,2023-07-03,28.3
Cairo,2023-07-03,31.0
X
