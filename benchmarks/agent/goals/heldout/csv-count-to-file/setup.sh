#!/usr/bin/env bash
# CSV files at several depths; a compressed .csv.gz, a directory named like a CSV, a .tsv and a
# file whose name contains "csv" without the extension.
set -euo pipefail
mkdir -p data/raw/2022 data/raw/2023 data/clean data/tables.csv data/docs
printf 'a,b\n1,2\n' > data/raw/2022/jan.csv
printf 'a,b\n3,4\n' > data/raw/2022/feb.csv
printf 'a,b\n5,6\n' > data/raw/2023/jan.csv
printf 'gz' > data/raw/2023/feb.csv.gz
printf 'a\tb\n' > data/raw/2023/mar.tsv
printf 'a,b\n' > data/clean/all.csv
printf 'a,b\n' > data/clean/summary.csv
printf 'x' > data/tables.csv/README
printf 'how to export csv files\n' > data/docs/csv_export_howto.txt
printf 'a,b\n' > data/sample.csv
