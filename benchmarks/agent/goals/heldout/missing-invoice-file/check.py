"""No invoices/2023-03.csv; totals of the near files: 200.50 (2023-02), 445.24 (2023-04),
227.00 (2022-03)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="file invoices/2023-03.csv", near=[200.50, 445.24, 227.00], tol=0.01)

if __name__ == "__main__":
    main(SPEC, __file__)
