#!/usr/bin/env bash
# "Sales" also appears in job titles of other departments and in an email address; one
# department name is in lower case in the notes.
set -euo pipefail
cat > staff.csv <<'X'
id,name,department,title,email
101,Hana Kim,Sales,Account Executive,hana@corp.example
102,Luis Ortega,Engineering,Sales Engineer,luis@corp.example
103,Mia Jensen,Sales,Sales Manager,mia@corp.example
104,Noah Weber,Marketing,Presales Consultant,noah@corp.example
105,Olga Ivanova,Finance,Accountant,olga@corp.example
106,Pedro Silva,Sales,Account Executive,pedro@corp.example
107,Quinn Taylor,Support,Support Lead,sales-support@corp.example
108,Rosa Diaz,Engineering,Backend Developer,rosa@corp.example
109,Sven Olsen,Sales,Sales Representative,sven@corp.example
110,Tara Singh,Marketing,Content Writer,tara@corp.example
X
