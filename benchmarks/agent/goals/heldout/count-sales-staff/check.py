"""4 (department == Sales); `grep -c Sales` 5 (a Sales Engineer in Engineering), `grep -ci sales`
7 (Presales, sales-support@); off by one 3."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=4, distractors=[3, 5, 7])

if __name__ == "__main__":
    main(SPEC, __file__)
