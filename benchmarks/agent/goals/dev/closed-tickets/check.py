"""4 closed tickets (closed, Closed, CLOSED, closed); exact-case match gives 2, a word match
anywhere in the line 6 or 7."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=4, distractors=[2, 5, 6, 7])

if __name__ == "__main__":
    main(SPEC, __file__)
