"""Magnus (101), Ingrid (45), Emil (28), Sofie (9); a text sort gives Sofie, Ingrid, Emil, Magnus;
Lars and Nora live in Bergen."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"oslo.txt": "Magnus\nIngrid\nEmil\nSofie\n"}, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
