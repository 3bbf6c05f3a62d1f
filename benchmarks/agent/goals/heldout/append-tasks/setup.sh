#!/usr/bin/env bash
# A to-do list and new tasks; new_tasks.txt has no final newline, and a similarly named
# todo.txt.bak exists.
set -euo pipefail
printf -- '- [x] book flights\n- [ ] renew passport\n- [ ] pay electricity bill\n' > todo.txt
printf -- '- [ ] old item\n' > todo.txt.bak
printf -- '- [ ] buy a birthday present for Sam\n- [ ] call the plumber\n- [ ] back up laptop' > new_tasks.txt
