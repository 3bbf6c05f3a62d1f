#!/usr/bin/env bash
# Photo folders with sidecar files whose names contain ".jpg" but do not end with it, a .png-only
# folder, and a loose .jpg directly in photos/ (not in any folder).
set -euo pipefail
mkdir -p photos/2021 photos/2022 photos/holidays photos/scans
for i in 1 2 3; do printf 'jpg' > "photos/2021/img_00$i.jpg"; done
printf '{"iso": 100}' > photos/2021/img_001.jpg.json
for i in 1 2 3 4 5; do printf 'jpg' > "photos/2022/dsc_10$i.jpg"; done
printf 'thumbs' > photos/2022/Thumbs.db
printf 'jpg' > photos/holidays/beach.jpg
printf 'jpg' > photos/holidays/hotel.jpg
printf 'caption' > photos/holidays/beach.jpg.txt
printf 'png' > photos/scans/passport.png
printf 'png' > photos/scans/letter.png
printf 'jpg' > photos/cover.jpg
