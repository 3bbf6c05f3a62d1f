"""There is no flux capacitor in the catalogue (the tool says so)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(near=[], missing="flux capacitor")

if __name__ == "__main__":
    main(SPEC, __file__)
