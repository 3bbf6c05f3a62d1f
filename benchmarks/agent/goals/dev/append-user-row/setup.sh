#!/usr/bin/env bash
# The file does not end with a newline, so a plain `echo ... >>` glues the row to the last line.
set -euo pipefail
printf 'username,email,role\nanna,anna@example.com,admin\nbruno,bruno@example.com,viewer\ncarlos,carlos@example.com,editor\ndmitri,dmitri@example.com,viewer' > members.csv
printf 'admin: everything\neditor: edit pages\nviewer: read only\n' > roles.txt
