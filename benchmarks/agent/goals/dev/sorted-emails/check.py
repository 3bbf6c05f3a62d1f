"""emails.txt = the 7 emails, lower case, sorted (they sort the same in C and en_US locales)."""
import csv
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

rows = csv.DictReader(io.StringIO(inputs(__file__)["contacts.csv"]))
SPEC = FileGoal(outputs={"emails.txt": "".join(e + "\n" for e in sorted(r["email"].lower() for r in rows))},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
