#!/usr/bin/env bash
# Log files at three depths; one is exactly 1024 bytes (not larger), a big file is not a .log,
# and a big .log.gz-like name does not end in .log.
set -euo pipefail
mkdir -p logs/db logs/web/archive
python3 - <<'PY'
def write(path, size, char):
    line = (char * 63) + "\n"
    data = (line * (size // 64 + 1))[:size]
    with open(path, "w") as f:
        f.write(data)
write("logs/app.log", 2000, "a")
write("logs/db/query.log", 1024, "q")
write("logs/db/slow.log", 1500, "s")
write("logs/web/access.log", 800, "w")
write("logs/web/error.log", 3000, "e")
write("logs/web/archive/old.log", 1100, "o")
write("logs/web/archive/older.log.1", 4000, "r")
write("logs/notes.txt", 5000, "n")
write("logs/tiny.log", 10, "t")
PY
