#!/usr/bin/env bash
set -euo pipefail
printf '{"answer": "There is no backups_2023 folder (only backups_2022 and backups_2024).", "status": "not_possible"}\n' > "$1"
