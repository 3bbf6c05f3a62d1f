#!/usr/bin/env bash
# Common-log-format lines; "404" also appears in a path, in a response size and in a query
# string of requests that did not get a 404.
set -euo pipefail
cat > access.log <<'X'
10.0.0.5 - - [02/May/2024:10:00:01 +0000] "GET /index.html HTTP/1.1" 200 5120
10.0.0.7 - - [02/May/2024:10:00:03 +0000] "GET /old-page HTTP/1.1" 404 312
10.0.0.5 - - [02/May/2024:10:00:04 +0000] "GET /errors/404.html HTTP/1.1" 200 1404
10.0.0.9 - - [02/May/2024:10:00:09 +0000] "GET /api/items?page=404 HTTP/1.1" 200 88
10.0.0.9 - - [02/May/2024:10:00:10 +0000] "POST /api/cart HTTP/1.1" 201 404
10.0.0.2 - - [02/May/2024:10:00:12 +0000] "GET /favicon.ico HTTP/1.1" 404 0
10.0.0.3 - - [02/May/2024:10:00:15 +0000] "GET /admin HTTP/1.1" 403 199
10.0.0.7 - - [02/May/2024:10:00:20 +0000] "GET /blog/2019/04/04 HTTP/1.1" 404 312
10.0.0.4 - - [02/May/2024:10:00:22 +0000] "GET /search?q=shoes HTTP/1.1" 200 7000
10.0.0.4 - - [02/May/2024:10:00:25 +0000] "GET /robots.txt HTTP/1.1" 304 0
10.0.0.8 - - [02/May/2024:10:00:31 +0000] "GET /wp-login.php HTTP/1.1" 404 312
X
