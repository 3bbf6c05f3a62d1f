"""podium.txt = Lou (120), Nia (101), Oto (95); a text sort puts Max (9) and Pia (8) first."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"podium.txt": "Lou\nNia\nOto\n"}, trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
