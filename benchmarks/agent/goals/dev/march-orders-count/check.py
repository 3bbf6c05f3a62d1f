"""4 (2024-03-01, -03, -17, -31); 6 with March 2023; 10 orders in all."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=4, distractors=[6, 10, 11, 7])

if __name__ == "__main__":
    main(SPEC, __file__)
