#!/usr/bin/env bash
# Common log format: the status is the field after the quoted request. "404" also appears in a
# path and as a response size, so a plain search for 404 finds 5 lines; 3 have status 404.
set -euo pipefail
cat > access.log <<'Y'
10.0.0.1 - - [12/Mar/2024:10:00:01 +0000] "GET /index.html HTTP/1.1" 200 5120
10.0.0.2 - - [12/Mar/2024:10:00:03 +0000] "GET /missing.png HTTP/1.1" 404 312
10.0.0.3 - - [12/Mar/2024:10:00:04 +0000] "GET /errors/404.html HTTP/1.1" 200 2048
10.0.0.1 - - [12/Mar/2024:10:00:09 +0000] "POST /api/login HTTP/1.1" 302 404
10.0.0.4 - - [12/Mar/2024:10:01:15 +0000] "GET /old/page HTTP/1.1" 404 298
10.0.0.2 - - [12/Mar/2024:10:01:20 +0000] "GET /about.html HTTP/1.1" 200 1733
10.0.0.5 - - [12/Mar/2024:10:02:41 +0000] "GET /favicon.ico HTTP/1.1" 404 0
10.0.0.3 - - [12/Mar/2024:10:03:02 +0000] "GET /index.html HTTP/1.1" 304 0
Y
