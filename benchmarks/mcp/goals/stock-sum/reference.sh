#!/usr/bin/env bash
set -euo pipefail
printf '%s\n' '{"answer": "22 units (5 gizmos and 17 widgets).", "status": "verified"}' > "$1"
