#!/usr/bin/env bash
# Nothing to start from but an unrelated notes file.
set -euo pipefail
printf 'shopping: milk, eggs\n' > notes.txt
