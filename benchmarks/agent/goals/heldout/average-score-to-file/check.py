"""avg.txt holds 77.1 (540 / 7); counting the blank line gives 67.5, the header too 60.0."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"avg.txt": "77.1\n"}, normalize=str.strip, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
