#!/usr/bin/env bash
# Exam results; a header, a blank line, and an attempts column next to the scores.
set -euo pipefail
cat > results.csv <<'X'
student,attempts,score
Ada,1,81
Bea,2,67
Cy,1,93
Dan,3,58

Eli,1,88
Fay,2,74
Gus,1,79
X
