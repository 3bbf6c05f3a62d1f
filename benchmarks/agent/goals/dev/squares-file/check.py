"""squares.txt = 1 4 9 ... 144, one per line (trailing spaces tolerated)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"squares.txt": "".join(f"{i * i}\n" for i in range(1, 13))},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
