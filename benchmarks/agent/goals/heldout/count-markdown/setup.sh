#!/usr/bin/env bash
# Markdown notes at several depths, one hidden; a directory whose name ends in .md; backups and
# other files whose names contain "md".
set -euo pipefail
mkdir -p notes/work/2023 notes/personal notes/old.md notes/.trash
printf '# Ideas\n' > notes/ideas.md
printf '# Inbox\n' > notes/inbox.md
printf '# Draft\n' > notes/.draft.md
printf '# Standup\n' > notes/work/standup.md
printf '# Q1\n' > notes/work/2023/q1.md
printf '# Q2\n' > notes/work/2023/q2.md
printf '# Q2 old\n' > notes/work/2023/q2.md.orig
printf 'cmd line tips\n' > notes/work/cmd_tips.txt
printf '# Books\n' > notes/personal/books.md
printf 'recipes\n' > notes/personal/recipes.mdx
printf 'x' > notes/old.md/placeholder.txt
printf '# Deleted\n' > notes/.trash/deleted.md
printf 'readme\n' > notes/README
