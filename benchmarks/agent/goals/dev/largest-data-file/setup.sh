#!/usr/bin/env bash
# Files at several depths: the biggest file is in a subfolder and has few (long) lines; the file
# with the most lines and the biggest top-level file are others. Directories are 4096 bytes.
set -euo pipefail
mkdir -p data/archive data/raw
python3 - <<'PY'
with open("data/customers.csv", "w") as f:
    f.write("id,name,city\n")
    for i in range(1, 121):
        f.write(f"{i},customer{i:03d},city{i % 7}\n")
with open("data/archive/events_2022.json", "w") as f:
    for i in range(6):
        f.write('{"day": %d, "events": [%s]}\n' % (i, ", ".join(str(j * 7 % 101) for j in range(400))))
with open("data/archive/events_2021.json", "w") as f:
    for i in range(4):
        f.write('{"day": %d, "events": [%s]}\n' % (i, ", ".join(str(j * 3 % 97) for j in range(300))))
with open("data/raw/sensor.log", "w") as f:
    for i in range(190):
        f.write(f"t={i:04d} v={i * 13 % 50}\n")
with open("data/readme.txt", "w") as f:
    f.write("Exports from the shop database.\n")
with open("data/.DS_Store", "w") as f:
    f.write("x" * 64)
PY
