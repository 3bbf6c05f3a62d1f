"""reports/2024-01-sales.csv, 2024-02-sales.csv, 2024-02-costs.csv, 2024-01-cost-centres.csv with
the old contents, the old names gone; summary.csv and notes-2024-01.txt untouched (a split at the
first dash makes "centres-2024-01-cost" or similar)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

src = inputs(__file__)
moves = {"sales-2024-01": "2024-01-sales", "sales-2024-02": "2024-02-sales",
         "costs-2024-02": "2024-02-costs", "cost-centres-2024-01": "2024-01-cost-centres"}
SPEC = FileGoal(outputs={f"reports/{new}.csv": src[f"reports/{old}.csv"] for old, new in moves.items()},
                absent=[f"reports/{old}.csv" for old in moves])

if __name__ == "__main__":
    main(SPEC, __file__)
