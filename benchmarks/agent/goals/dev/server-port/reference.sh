#!/usr/bin/env bash
set -euo pipefail
port=$(python3 -c 'import configparser; c = configparser.ConfigParser(inline_comment_prefixes=(";",)); c.read("config/app.ini"); print(c["server"]["port"])')
printf '{"answer": "The web server listens on port %s.", "status": "verified"}\n' "$port" > "$1"
