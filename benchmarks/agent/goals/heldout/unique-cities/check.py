"""cities.txt = Berlin Lisbon Madrid Oslo Paris Vienna, one per line."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"cities.txt": "Berlin\nLisbon\nMadrid\nOslo\nParis\nVienna\n"},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
