"""emails_clean.txt: ann@example.com, bob@example.com, cy@example.org (lower-cased, unique,
sorted)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"emails_clean.txt": "ann@example.com\nbob@example.com\ncy@example.org\n"})

if __name__ == "__main__":
    main(SPEC, __file__)
