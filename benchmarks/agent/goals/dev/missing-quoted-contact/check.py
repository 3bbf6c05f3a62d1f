"""No "Dana Smith"; near matches Dana Smyth (555-0101) and Dan Smith (555-0177)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="contact Dana Smith", near=["555-0101", "555-0177"])

if __name__ == "__main__":
    main(SPEC, __file__)
