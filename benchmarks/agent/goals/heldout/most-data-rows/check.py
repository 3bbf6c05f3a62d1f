"""orders.csv (40 rows); returns.csv has the most lines (38 rows + 6 blank), customers.csv the
most bytes, README.txt is not a CSV."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="orders.csv", distractors=["returns.csv", "customers.csv", "README.txt"])

if __name__ == "__main__":
    main(SPEC, __file__)
