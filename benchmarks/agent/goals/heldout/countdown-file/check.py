"""countdown.txt = 10 9 ... 1 liftoff, one per line (trailing spaces tolerated)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"countdown.txt": "".join(f"{i}\n" for i in range(10, 0, -1)) + "liftoff\n"},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
