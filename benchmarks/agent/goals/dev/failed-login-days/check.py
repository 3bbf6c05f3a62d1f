"""failed_days.txt = 2024-05-01, 2024-05-03, 2024-05-03 (one line per failed login; a word match
anywhere adds 2024-05-02; full timestamps are not just the day)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"failed_days.txt": "2024-05-01\n2024-05-03\n2024-05-03\n"},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
