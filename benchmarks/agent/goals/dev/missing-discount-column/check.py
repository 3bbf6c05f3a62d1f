"""No discount column; the near match discount_pct adds up to 30; amount totals 250."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="column discount", near=[30, 250])

if __name__ == "__main__":
    main(SPEC, __file__)
