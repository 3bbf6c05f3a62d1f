"""cost.txt = 297 (3 x 99 EUR); 3 widgets would be 126, the gizmo stock is 5."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"cost.txt": "297\n"}, normalize=lambda s: s.strip() + "\n")

if __name__ == "__main__":
    main(SPEC, __file__)
