#!/usr/bin/env bash
# No "Dana Smith"; "Dana Smyth" and "Dan Smith" are near matches.
set -euo pipefail
cat > contacts.csv <<'X'
name,phone,city
Dana Smyth,555-0101,Leeds
Dan Smith,555-0177,York
Ola Berg,555-0142,Oslo
X
