#!/usr/bin/env bash
# A logging fileConfig: DEBUG appears four times (root, db, the handler, and another file's
# setting), so a global replace changes too much; a comment line is lost if the file is
# rewritten with configparser.
set -euo pipefail
mkdir -p app/conf
cat > app/conf/logging.conf <<'L'
# loaded by app/main.py at startup
[loggers]
keys=root,db,http

[handlers]
keys=console

[formatters]
keys=plain

[logger_root]
level=DEBUG
handlers=console

[logger_db]
level=DEBUG
handlers=console
qualname=app.db
propagate=0

[logger_http]
level=INFO
handlers=console
qualname=app.http
propagate=0

[handler_console]
class=StreamHandler
level=DEBUG
formatter=plain
args=(sys.stderr,)

[formatter_plain]
format=%(asctime)s %(levelname)s %(name)s: %(message)s
L
printf 'name=shop\nlog_level=DEBUG\nworkers=4\n' > app/conf/app.conf
