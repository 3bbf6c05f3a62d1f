"""kettle (57 units over 4 sales); lamp has the largest single sale (40) and 45 in all; toaster 39;
mug is the last row."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="kettle", distractors=["lamp", "toaster", "mug"])

if __name__ == "__main__":
    main(SPEC, __file__)
