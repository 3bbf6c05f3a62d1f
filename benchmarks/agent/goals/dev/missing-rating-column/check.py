"""No rating column; near matches: the mean of ratings_count (85.83), its sum (515), the mean and
sum of price (36.22, 217.34)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="column rating", near=[85.83, 515, 36.22, 217.34], tol=0.05)

if __name__ == "__main__":
    main(SPEC, __file__)
