"""250 EUR x 1.08 = 270 USD; dividing gives 231.48, the GBP rate 212.5."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=270, distractors=[231.48, 212.5], tol=0.01)

if __name__ == "__main__":
    main(SPEC, __file__)
