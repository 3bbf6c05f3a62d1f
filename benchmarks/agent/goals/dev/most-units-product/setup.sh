#!/usr/bin/env bash
# The largest single sale is a lamp (40 units); summed over its sales the kettle sells most (57).
set -euo pipefail
cat > sales.csv <<'Y'
date,product,units
2024-05-01,kettle,12
2024-05-01,lamp,40
2024-05-02,kettle,15
2024-05-02,toaster,9
2024-05-03,kettle,18
2024-05-03,lamp,5
2024-05-04,toaster,30
2024-05-04,kettle,12
2024-05-05,mug,7
Y
