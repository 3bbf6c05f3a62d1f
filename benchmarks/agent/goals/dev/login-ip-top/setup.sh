#!/usr/bin/env bash
# Access log lines. 10.0.0.9 has the most lines containing "/login" only because of /login-help;
# 10.0.0.12 made the most requests overall; 10.0.0.50 looks like 10.0.0.5.
set -euo pipefail
mkdir -p logs
cat > logs/access.log <<'L'
10.0.0.12 - - [12/Mar/2024:09:00:01 +0000] "GET / HTTP/1.1" 200 5120
10.0.0.7 - - [12/Mar/2024:09:00:03 +0000] "GET /login HTTP/1.1" 200 812
10.0.0.9 - - [12/Mar/2024:09:00:04 +0000] "GET /login-help HTTP/1.1" 200 1290
10.0.0.7 - - [12/Mar/2024:09:00:05 +0000] "POST /login HTTP/1.1" 401 64
10.0.0.12 - - [12/Mar/2024:09:00:09 +0000] "GET /pricing HTTP/1.1" 200 4410
10.0.0.5 - - [12/Mar/2024:09:00:11 +0000] "POST /login HTTP/1.1" 401 64
10.0.0.9 - - [12/Mar/2024:09:00:12 +0000] "GET /login HTTP/1.1" 200 812
10.0.0.50 - - [12/Mar/2024:09:00:13 +0000] "GET /about HTTP/1.1" 200 2210
10.0.0.12 - - [12/Mar/2024:09:00:15 +0000] "GET /blog HTTP/1.1" 200 9031
10.0.0.9 - - [12/Mar/2024:09:00:16 +0000] "GET /login-help HTTP/1.1" 200 1290
10.0.0.7 - - [12/Mar/2024:09:00:18 +0000] "POST /login HTTP/1.1" 401 64
10.0.0.5 - - [12/Mar/2024:09:00:20 +0000] "POST /login HTTP/1.1" 401 64
10.0.0.12 - - [12/Mar/2024:09:00:22 +0000] "GET /login HTTP/1.1" 200 812
10.0.0.9 - - [12/Mar/2024:09:00:25 +0000] "GET /login-help HTTP/1.1" 200 1290
10.0.0.12 - - [12/Mar/2024:09:00:27 +0000] "GET /blog/2 HTTP/1.1" 200 8710
10.0.0.7 - - [12/Mar/2024:09:00:30 +0000] "POST /login HTTP/1.1" 302 0
10.0.0.5 - - [12/Mar/2024:09:00:31 +0000] "POST /login HTTP/1.1" 302 0
10.0.0.12 - - [12/Mar/2024:09:00:33 +0000] "GET /contact HTTP/1.1" 200 3100
10.0.0.9 - - [12/Mar/2024:09:00:36 +0000] "POST /login HTTP/1.1" 302 0
10.0.0.12 - - [12/Mar/2024:09:00:40 +0000] "GET /favicon.ico HTTP/1.1" 404 0
L
