#!/usr/bin/env bash
# Three empty files (one in a subfolder); the others hold something, one only a space.
set -euo pipefail
mkdir -p tmp/cache
: > tmp/a.log
: > tmp/c.txt
: > tmp/cache/old.tmp
printf 'hello\n' > tmp/b.log
printf ' ' > tmp/space.txt
printf 'x' > tmp/cache/keep.tmp
printf 'keep\n' > outside_empty_check.txt
