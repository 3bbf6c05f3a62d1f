"""5 [ERROR] entries; `grep -c ERROR` counts 9 (the word is in other entries' messages),
`grep -ci error` 12, with logs/old.log 6 (or 10 for `grep -rc ERROR logs`); off by one 4."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=5, distractors=[4, 6, 9, 10, 12])

if __name__ == "__main__":
    main(SPEC, __file__)
