"""5 gizmos + 17 widgets = 22 (shop.stock_level twice); their prices add to 141."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=22, distractors=[141, 12, 39])

if __name__ == "__main__":
    main(SPEC, __file__)
