#!/usr/bin/env bash
# Grades with quoted names that contain commas (a naive comma cut shifts the columns there).
set -euo pipefail
cat > grades.csv <<'X'
student_id,name,course,grade
s01,Ana Costa,Math 101,A
s02,"O'Brien, Pat",Math 101,B+
s03,Ben Ito,Physics 110,B
s04,"Kowalski, Jan",Physics 110,A-
s05,Chloe Dubois,Chemistry 120,C+
s06,Dev Patel,Math 101,B
s07,"Lee, Min-jun",Chemistry 120,A
X
