#!/usr/bin/env bash
# Inventory with quoted fields (commas and a doubled quote inside) and a non-ASCII name.
set -euo pipefail
cat > inventory.csv <<'X'
sku,name,qty,location
A-100,"Bolt, hex M6",1200,aisle 3
A-101,"Bolt, hex M8",800,aisle 3
A-205,Washer,5000,aisle 4
B-010,"Cable tie 200mm ""black""",350,aisle 7
B-011,Cable tie 100mm,0,aisle 7
C-300,Café crème mugs,24,showroom
C-301,Glass jar,96,showroom
D-001,"Paint, white, 1L",40,store room
D-002,"Paint, blue, 1L",12,store room
E-500,Ladder,3,store room
X
