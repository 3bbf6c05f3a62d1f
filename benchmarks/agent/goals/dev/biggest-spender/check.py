"""Hannah Weber (105.25 in total); Oskar Lind has the largest single payment (95.50; 100.25 in
total); Mia Costa 92.50; the last row is Mia Costa."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="Hannah Weber", alternatives=["Hannah"],
                distractors=["Oskar Lind", "Oskar", "Mia Costa", "Mia"])

if __name__ == "__main__":
    main(SPEC, __file__)
