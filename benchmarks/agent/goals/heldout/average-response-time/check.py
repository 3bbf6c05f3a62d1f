"""246 ms (2706 / 11); dividing by line counts that include the blank lines or the header gives
225.5, 208.15, 193.29, 180.4; the sum 2706; the median 150."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=246, distractors=[2706, 225.5, 208.15, 193.29, 180.4, 150], tol=0.05)

if __name__ == "__main__":
    main(SPEC, __file__)
