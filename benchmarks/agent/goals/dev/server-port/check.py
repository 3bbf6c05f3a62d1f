"""8080 ([server] port); the other ports in the file: 5432 (database), 6379 (cache), 80 (commented)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=8080, distractors=[5432, 6379, 80])

if __name__ == "__main__":
    main(SPEC, __file__)
