#!/usr/bin/env bash
# The phrase is written "Project Falcon" (capitalised): a case-sensitive grep for the goal's
# words finds nothing. Another file mentions a falcon, and one "project" without falcon.
set -euo pipefail
mkdir -p notes/2024 notes/old
printf 'Kickoff\nProject Falcon starts in May.\nBudget approved.\n' > notes/2024/kickoff.md
printf 'Saw a falcon over the river.\n' > notes/old/birds.md
printf 'The project plan is late.\n' > notes/2024/status.md
