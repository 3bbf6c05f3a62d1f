#!/usr/bin/env bash
# An empty project apart from a launch checklist.
set -euo pipefail
printf 'fuel: ok\nweather: ok\n' > checklist.txt
