"""2 (orders 2 and 4); counting by total quantity > 2 gives 5; ">= 2 items" gives 4; 6 orders."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=2, distractors=[5, 4, 6])

if __name__ == "__main__":
    main(SPEC, __file__)
