#!/usr/bin/env bash
set -euo pipefail
mkdir -p archive
mv inbox/*.csv archive/
printf '{"answer": "Moved 3 files into archive/.", "status": "verified"}\n' > "$1"
