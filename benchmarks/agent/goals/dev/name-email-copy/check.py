"""staff_contacts.csv = name,email then the three people, name first (the source has email first;
quoted commas shift a naive split)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"staff_contacts.csv": "name,email\nAna Lima,ana@example.com\n"
                         "Ben Ode,ben@example.com\nChloe Park,chloe@example.com\n"},
                normalize=lambda s: s.replace("\r\n", "\n").strip())

if __name__ == "__main__":
    main(SPEC, __file__)
