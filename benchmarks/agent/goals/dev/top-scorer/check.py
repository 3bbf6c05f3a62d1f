"""Priya Natarajan (104); a text sort puts Tom Becker (99) or Diego Alvarez (9) first; Chloe Martin
(100) is the runner-up; Lena Fischer is the first row."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="Priya Natarajan", alternatives=["Priya"],
                distractors=["Tom Becker", "Tom", "Chloe Martin", "Chloe", "Diego Alvarez", "Diego",
                             "Lena Fischer", "Lena"])

if __name__ == "__main__":
    main(SPEC, __file__)
