"""7; 13 lines; non-blank 11; not starting with # 10; neither blank nor starting with # (the indented comment counted) 8; lines with = 9."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=7, distractors=[13, 11, 10, 8, 9])

if __name__ == "__main__":
    main(SPEC, __file__)
