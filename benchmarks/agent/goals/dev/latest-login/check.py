"""mlopez (2024-03-21 08:03:55); tnguyen logged in earlier that day; bwhite is the last row; rkhan
the first."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="mlopez", distractors=["tnguyen", "bwhite", "rkhan", "asmith", "jdoe"])

if __name__ == "__main__":
    main(SPEC, __file__)
