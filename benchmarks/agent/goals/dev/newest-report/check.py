"""report_10.txt (2024-06-20); report_9.txt sorts last by name, report_12.txt is the highest
number, report_1.txt the oldest."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="report_10.txt", alternatives=["reports/report_10.txt", "report_10"],
                distractors=["report_9.txt", "report_12.txt", "report_1.txt", "report_2.txt"])

if __name__ == "__main__":
    main(SPEC, __file__)
