#!/usr/bin/env bash
# Pretty-printed JSON: the email is nested under "contact", one name holds a comma (the CSV must
# quote it), and an inactive user's note contains the word "active", so a line grep misleads.
set -euo pipefail
mkdir -p export
cat > export/users.json <<'L'
{
  "exported": "2024-05-01",
  "users": [
    {
      "id": 1,
      "name": "Ana Lima",
      "active": true,
      "contact": {"email": "ana@example.com", "phone": "555-0101"}
    },
    {
      "id": 2,
      "name": "Lee, Ann",
      "active": true,
      "contact": {"email": "ann.lee@example.com", "phone": "555-0102"}
    },
    {
      "id": 3,
      "name": "Bo Chen",
      "active": false,
      "note": "was active until march",
      "contact": {"email": "bo@example.com", "phone": "555-0103"}
    },
    {
      "id": 4,
      "name": "Cleo Park",
      "active": true,
      "contact": {"email": "cleo@example.com", "phone": "555-0104"}
    },
    {
      "id": 5,
      "name": "Dev Rao",
      "active": false,
      "contact": {"email": "dev@example.com", "phone": "555-0105"}
    }
  ]
}
L
