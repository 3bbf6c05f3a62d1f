#!/usr/bin/env bash
# Source files at several depths; one file is named TODO-list.md but does not contain the marker,
# another has "todo" only in lower case.
set -euo pipefail
mkdir -p src/util src/web/static
cat > src/main.py <<'X'
def main():
    # TODO: parse command-line options
    print("hello")
X
cat > src/util/io.py <<'X'
def read(path):
    return open(path).read()  # TODO close the file
X
cat > src/util/fmt.py <<'X'
def money(x):
    # the todo list lives in the tracker
    return f"{x:.2f}"
X
cat > src/web/app.js <<'X'
// TODO(ana): debounce search
export function search(q) { return fetch("/search?q=" + q); }
X
cat > src/web/static/style.css <<'X'
body { margin: 0; }
X
cat > src/TODO-list.md <<'X'
Nothing left for this release.
X
cat > src/web/routes.py <<'X'
ROUTES = ["/", "/search"]  # FIXME: add /cart; see TODO.md in the wiki
X
