#!/usr/bin/env bash
set -euo pipefail
printf '{"answer": "There is no contact named Dana Smith in contacts.csv.", "status": "not_possible"}\n' > "$1"
