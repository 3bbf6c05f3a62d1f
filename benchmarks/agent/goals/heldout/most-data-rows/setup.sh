#!/usr/bin/env bash
# Three exports: the one with the most rows is neither the biggest in bytes nor the one with the
# most lines (trailing blank lines inflate `wc -l`).
set -euo pipefail
mkdir -p exports
python3 - <<'PY'
with open("exports/orders.csv", "w") as f:
    f.write("id,total\n")
    for i in range(40):
        f.write(f"{i + 1},{(i * 37) % 200}.00\n")
with open("exports/returns.csv", "w") as f:
    f.write("id,order_id,reason\n")
    for i in range(38):
        f.write(f"{i + 1},{(i * 11) % 40 + 1},damaged\n")
    f.write("\n" * 6)
with open("exports/customers.csv", "w") as f:
    f.write("id,name,street,city,notes\n")
    for i in range(25):
        f.write(f"{i + 1},Customer number {i + 1},{i + 10} Long Street Name Avenue,Springfield,"
                f"prefers delivery in the morning and calls ahead\n")
with open("exports/README.txt", "w") as f:
    f.write("Nightly exports.\n" * 60)
PY
