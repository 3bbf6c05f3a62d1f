#!/usr/bin/env bash
# No user "alice"; "alicia" and "alison" are near matches, and "malice" contains the name.
set -euo pipefail
cat > accounts.csv <<'X'
username,full_name,email,created
alicia,Alicia Moreno,alicia.moreno@example.com,2021-04-02
alison,Alison Park,a.park@example.com,2021-06-18
bob,Bob Stone,bob@example.com,2022-01-09
malice_bot,Malice Test Bot,noreply-malice@example.com,2022-03-30
chen,Chen Wei,chen.wei@example.com,2022-11-11
dora,Dora Ilic,dora@example.com,2023-02-14
X
