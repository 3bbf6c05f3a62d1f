"""tmp/a.log, tmp/c.txt, tmp/cache/old.tmp gone; tmp/b.log, tmp/space.txt (one space: not empty),
tmp/cache/keep.tmp and the file outside tmp untouched."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={}, absent=["tmp/a.log", "tmp/c.txt", "tmp/cache/old.tmp"])

if __name__ == "__main__":
    main(SPEC, __file__)
