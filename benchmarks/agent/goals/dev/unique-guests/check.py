"""guests_unique.txt = Zoe, Adam, Mia, Liam, Emma; `sort -u` reorders, `uniq` keeps repeats."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"guests_unique.txt": "Zoe\nAdam\nMia\nLiam\nEmma\n"}, trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
