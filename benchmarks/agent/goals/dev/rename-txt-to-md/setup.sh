#!/usr/bin/env bash
# Drafts: three .txt files to rename; a backup whose name contains ".txt" but does not end with
# it, an existing .md, and a .txt outside drafts/ that must stay.
set -euo pipefail
mkdir -p drafts other
printf '# Introduction\n\nWhy we wrote this book.\n' > drafts/intro.txt
printf '# Chapter 1\n\nIt was a cold morning.\n' > drafts/chapter1.txt
printf '# Chapter 2\n\nThe train was late.\n' > drafts/chapter2.txt
printf 'old notes\n' > drafts/notes.txt.bak
printf '# Outline\n\n1. intro\n2. chapter 1\n' > drafts/outline.md
printf 'buy stamps\n' > other/todo.txt
