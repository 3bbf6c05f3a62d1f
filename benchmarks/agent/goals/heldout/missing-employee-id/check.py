"""No E1042; near matches' departments: Procurement (E1024), Facilities (E1043), Legal (E1402)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="employee E1042", near=["Procurement", "Facilities", "Legal"])

if __name__ == "__main__":
    main(SPEC, __file__)
