"""shipped_count.txt holds 5 (`grep -c shipped` gives 9; `grep -c ',shipped,'` 5 is right)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"shipped_count.txt": "5\n"}, trailing_ws=True, kind="multistep",
                normalize=str.strip)

if __name__ == "__main__":
    main(SPEC, __file__)
