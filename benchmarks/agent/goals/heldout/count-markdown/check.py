"""8 .md files (with .draft.md and .trash/deleted.md); the old.md directory makes 9; no hidden
ones 6; `ls -R | grep` 7; `grep md` over paths 13; top level only 5 (with .draft.md) ."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=8, distractors=[5, 6, 7, 9, 13])

if __name__ == "__main__":
    main(SPEC, __file__)
