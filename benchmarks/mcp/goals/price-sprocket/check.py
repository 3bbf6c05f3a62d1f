"""13 EUR (shop.catalogue_price); the sprocket's stock is 64, a widget costs 42."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=13, distractors=[64, 42])

if __name__ == "__main__":
    main(SPEC, __file__)
