#!/usr/bin/env bash
# There is no config/mail.conf, only the template mail.conf.example (smtp port 587, imap 993) and
# an unrelated app.conf with its own port.
set -euo pipefail
mkdir -p config
cat > config/mail.conf.example <<'L'
# copy this to mail.conf and fill in the real values
[smtp]
host = smtp.example.com
port = 587
user = CHANGE_ME

[imap]
host = imap.example.com
port = 993
L
printf '[server]\nport = 8080\nworkers = 4\n' > config/app.conf
