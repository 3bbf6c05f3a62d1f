"""Lena Fox (190.00 in one order; 200 in total); Ravi Shah has the largest total (225) over
three orders; Tom Berg 110."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="Lena Fox", alternatives=["Lena"],
                distractors=["Ravi Shah", "Ravi", "Tom Berg", "Tom"])

if __name__ == "__main__":
    main(SPEC, __file__)
