#!/usr/bin/env bash
# Two titles are quoted because they hold a comma, so replacing commas with pipes splits them
# and leaves the quotes in.
set -euo pipefail
mkdir -p lists
cat > lists/books.csv <<'L'
title,author,year
"Name of the Rose, The",Umberto Eco,1980
Dune,Frank Herbert,1965
"Hitchhiker's Guide to the Galaxy, The",Douglas Adams,1979
Beloved,Toni Morrison,1987
L
printf 'to read next: Middlemarch\n' > lists/wishlist.txt
