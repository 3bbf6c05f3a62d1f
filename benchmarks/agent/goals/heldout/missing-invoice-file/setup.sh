#!/usr/bin/env bash
# Invoices for neighbouring months and the same month of another year, but not 2023-03.
set -euo pipefail
mkdir -p invoices
printf 'invoice,amount\nF-201,120.00\nF-202,80.50\n' > invoices/2023-02.csv
printf 'invoice,amount\nF-301,300.00\nF-302,45.25\nF-303,99.99\n' > invoices/2023-04.csv
printf 'invoice,amount\nE-301,210.00\nE-302,17.00\n' > invoices/2022-03.csv
