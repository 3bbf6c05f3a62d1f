"""Office chair (14250.50); a text sort picks Desk lamp (9840.00), the most units Cable tray, the
runner-up Standing desk (the TOTAL row fails by not naming Office chair)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="Office chair",
                distractors=["Desk lamp", "Cable tray", "Standing desk", "Monitor arm"])

if __name__ == "__main__":
    main(SPEC, __file__)
