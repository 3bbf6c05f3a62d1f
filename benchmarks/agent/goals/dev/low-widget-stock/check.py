"""Austin (4 widgets); over all rows Leeds (2 widgets-xl) or Dover (3 gears); Oslo has 9, Leeds
10 widgets."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="Austin", distractors=["Leeds", "Dover", "Oslo"])

if __name__ == "__main__":
    main(SPEC, __file__)
