#!/usr/bin/env bash
# People with pets: a pet's "age" is larger than every person's, and the oldest person is in the
# middle of the list.
set -euo pipefail
cat > people.json <<'X'
[
  {"name": "Rita", "age": 34, "pet": {"kind": "cat", "age": 3}},
  {"name": "Omar", "age": 58, "pet": null},
  {"name": "Walter", "age": 71, "pet": {"kind": "tortoise", "age": 96}},
  {"name": "Yuki", "age": 29, "pet": {"kind": "dog", "age": 7}},
  {"name": "Greta", "age": 66, "pet": null},
  {"name": "Ahmed", "age": 45, "pet": {"kind": "parrot", "age": 12}}
]
X
