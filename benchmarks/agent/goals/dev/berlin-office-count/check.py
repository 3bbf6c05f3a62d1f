"""4 (office Berlin in any case: Lena, Sara, Jonas, Kai); `grep -ci berlin` counts 6 lines (the
previous_office ones too), `grep -c Berlin` 5, `grep -oi berlin | wc -l` 7 (Jonas twice), a
case-sensitive match of the office column 3."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=4, distractors=[3, 5, 6, 7])

if __name__ == "__main__":
    main(SPEC, __file__)
