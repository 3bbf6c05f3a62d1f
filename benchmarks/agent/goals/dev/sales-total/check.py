"""2109.00; naive comma split (`awk -F, '{s+=$3}'`) drops the quoted rows: 1446.11; mean 150.64;
sum of the id column 14105."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=2109.00, distractors=[1446.11, 150.64, 14105], tol=0.01)

if __name__ == "__main__":
    main(SPEC, __file__)
