"""45 (the [database] section); 30 is [http]'s, 300 [cache]'s, 5 a commented-out value."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=45, distractors=[30, 300, 5])

if __name__ == "__main__":
    main(SPEC, __file__)
