"""4 customers (Ana, Ben, Chloe, Dev); counting rows gives 9, with the header 10."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=4, distractors=[9, 10, 3])

if __name__ == "__main__":
    main(SPEC, __file__)
