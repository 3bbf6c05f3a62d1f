"""555-0142 (docs.read_text_file on the handbook); 555-0199 is the old number."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="555-0142", distractors=["555-0199"])

if __name__ == "__main__":
    main(SPEC, __file__)
