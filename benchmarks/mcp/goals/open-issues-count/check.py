"""2 (1042 and 1044); Priya has 3 issues in all, and 4 issues are open."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=2, distractors=[3, 4])

if __name__ == "__main__":
    main(SPEC, __file__)
