#!/usr/bin/env bash
# No backups_2023/; backups_2022/ (4 files) and backups_2024/ (2 files) are near matches.
set -euo pipefail
mkdir -p backups_2022 backups_2024
for i in 1 2 3 4; do echo "dump $i" > "backups_2022/db_$i.sql"; done
for i in 1 2; do echo "dump $i" > "backups_2024/db_$i.sql"; done
echo "keep 2 years of backups" > README.txt
