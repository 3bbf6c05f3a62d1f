#!/usr/bin/env bash
# Pretty-printed JSON; each person also has an "account_age_days" field, so matching "age"
# loosely picks up the wrong numbers.
set -euo pipefail
python3 - <<'PY'
import json
people = [
    ("Ava", 23, 410), ("Ben", 31, 95), ("Carla", 45, 1200), ("Dev", 38, 30),
    ("Elif", 52, 2210), ("Farid", 27, 640), ("Greta", 36, 15), ("Hugo", 44, 365),
]
data = {"exported_by": "crm", "version": 3,
        "users": [{"name": n, "age": a, "account_age_days": d, "active": i % 3 != 0}
                  for i, (n, a, d) in enumerate(people)]}
with open("users.json", "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
PY
