"""active_users.csv = name,email then Ana Lima, "Lee, Ann", Cleo Park with their emails (read as
CSV, so the quoting style is free; the header's case too). Bo Chen (inactive, "was active" in a
note) and Dev Rao are left out."""
import csv
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402


def rows(text: str) -> str:
    parsed = list(csv.reader(io.StringIO(text.strip("\n"))))
    if parsed:
        parsed[0] = [c.strip().lower() for c in parsed[0]]
    return "\n".join("\x1f".join(c.strip() for c in r) for r in parsed)


SPEC = FileGoal(outputs={"active_users.csv": "name,email\nAna Lima,ana@example.com\n"
                         "\"Lee, Ann\",ann.lee@example.com\nCleo Park,cleo@example.com\n"},
                normalize=rows, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
