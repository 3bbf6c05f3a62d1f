"""10.0.0.7 (4 requests to /login); `grep /login` also counts /login-help and puts 10.0.0.9
first (5 lines, 2 of them /login); 10.0.0.12 made the most requests (7); 10.0.0.5 is the
runner-up on /login (3)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="10.0.0.7", distractors=["10.0.0.9", "10.0.0.12", "10.0.0.5"])

if __name__ == "__main__":
    main(SPEC, __file__)
