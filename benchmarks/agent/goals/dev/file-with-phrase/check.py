"""docs/2024/mar-meeting.txt; the other notes hold the words apart (feb-meeting, old-plan with the
words across a line break, jan-meeting with "budget")."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="mar-meeting.txt",
                distractors=["feb-meeting.txt", "jan-meeting.txt", "old-plan.txt", "index.md"])

if __name__ == "__main__":
    main(SPEC, __file__)
