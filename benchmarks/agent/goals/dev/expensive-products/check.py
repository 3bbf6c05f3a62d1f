"""expensive.txt = desk lamp, office chair, keyboard (20.00 is not more than 20)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"expensive.txt": "desk lamp\noffice chair\nkeyboard\n"},
                trailing_ws=True, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
