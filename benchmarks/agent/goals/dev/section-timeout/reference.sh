#!/usr/bin/env bash
set -euo pipefail
v=$(python3 -c 'import configparser; c = configparser.ConfigParser(); c.read("settings.ini"); print(c["database"]["timeout"])')
printf '{"answer": "%s", "status": "verified"}\n' "$v" > "$1"
