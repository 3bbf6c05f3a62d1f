#!/usr/bin/env bash
set -euo pipefail
awk '/^\[/ {sec = $0} sec == "[logger_root]" && /^level=/ {$0 = "level=WARNING"} {print}' \
  app/conf/logging.conf > app/conf/logging.conf.new
mv app/conf/logging.conf.new app/conf/logging.conf
printf '{"answer": "Set the root logger level to WARNING in app/conf/logging.conf.", "status": "verified"}\n' > "$1"
