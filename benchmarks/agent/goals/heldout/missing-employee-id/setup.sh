#!/usr/bin/env bash
# No E1042; E1024, E1402 and E1043 are near matches (transposed or neighbouring digits).
set -euo pipefail
cat > employees.csv <<'X'
employee_id,name,department,start_year
E0998,Kim Berg,Engineering,2015
E1024,Sara Lind,Procurement,2018
E1043,Jon Park,Facilities,2019
E1100,Ana Ruiz,Engineering,2020
E1402,Ole Dahl,Legal,2021
E1500,Eva Moss,Sales,2022
X
