"""notes/2024/kickoff.md ("Project Falcon"); distractors: birds.md (a falcon), status.md (a
project)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="kickoff.md", distractors=["birds.md", "status.md"])

if __name__ == "__main__":
    main(SPEC, __file__)
