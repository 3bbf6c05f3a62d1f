"""No weight column; near answers: the mean weight_class 1.8 (sum 9), the mean length_cm 48
(sum 240)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="column weight", near=[1.8, 9, 48, 240], tol=0.05)

if __name__ == "__main__":
    main(SPEC, __file__)
