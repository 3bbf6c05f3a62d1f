"""37; the sum 296; mixing in account_age_days 328.81; their mean 620.63; active users only 39.8."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=37, distractors=[296, 328.81, 620.63, 39.8], tol=0.05)

if __name__ == "__main__":
    main(SPEC, __file__)
