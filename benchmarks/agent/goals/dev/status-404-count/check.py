"""3 (status field = 404); `grep -c 404` finds 5 (a path and a response size too); 8 lines."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=3, distractors=[5, 8])

if __name__ == "__main__":
    main(SPEC, __file__)
