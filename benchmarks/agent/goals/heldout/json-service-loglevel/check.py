"""debug; the other levels in the file: critical (payments-legacy), notice (default), trace (auth)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="debug", distractors=["critical", "notice", "trace"])

if __name__ == "__main__":
    main(SPEC, __file__)
