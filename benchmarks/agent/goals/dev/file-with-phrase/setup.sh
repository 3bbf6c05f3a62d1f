#!/usr/bin/env bash
# Meeting notes; the two words appear separately, in another order, or across a line break in
# other files, but the phrase itself is in exactly one file (in a subfolder).
set -euo pipefail
mkdir -p docs/2024 docs/archive
cat > docs/2024/jan-meeting.txt <<'X'
January meeting
- reviewed the annual budget
- hiring plan approved
X
cat > docs/2024/feb-meeting.txt <<'X'
February meeting
- quarterly report delayed to March
- budget owners to send numbers by Friday
X
cat > docs/2024/mar-meeting.txt <<'X'
March meeting
- office move postponed
- Dana presented the quarterly budget; marketing spend cut by 10%
- next meeting in April
X
cat > docs/archive/old-plan.txt <<'X'
Plan (2022)
The budget (quarterly) was replaced by a rolling forecast.
We kept a quarterly
budget review for a while.
X
cat > docs/index.md <<'X'
# Docs
Meeting notes are in 2024/, older plans in archive/.
X
