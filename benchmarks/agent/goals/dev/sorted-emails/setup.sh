#!/usr/bin/env bash
# Contacts with mixed-case emails; some names are quoted and contain a comma, so cutting on the
# second comma gives part of the name instead of the email on those rows.
set -euo pipefail
cat > contacts.csv <<'X'
name,email,phone
Maria Lopez,Maria.Lopez@Example.com,555-0101
"Doe, Jane",jane.doe@example.org,555-0102
Kenji Sato,KSATO@example.net,555-0103
"Brown, Tom",tom@brown.example,555-0104
Zoe Hart,zoe@example.com,555-0105
"Ng, Wei",Wei.Ng@Example.ORG,555-0106
Omar Haddad,omar.h@example.com,555-0107
X
