#!/usr/bin/env bash
# Player scores; the top score has three digits, so a text (non-numeric) sort picks someone else.
set -euo pipefail
cat > scores.csv <<'X'
player,team,points
Lena Fischer,Red,87
Tom Becker,Blue,99
Aiko Tanaka,Green,92
Marco Rossi,Red,78

Priya Natarajan,Blue,104
Sam O'Neill,Green,95
Jonas Berg,Red,61
Chloe Martin,Blue,100
Diego Alvarez,Green,9
X
