#!/usr/bin/env bash
# Parcels have a numeric weight_class (1-3) and a length, but no weight.
set -euo pipefail
cat > parcels.csv <<'X'
parcel_id,destination,weight_class,length_cm
PX-1,Leeds,2,40
PX-2,York,1,25
PX-3,Bath,3,90
PX-4,Hull,1,30
PX-5,Ely,2,55
X
