"""avg_200.txt = 134.2 (120, 80, 310, 97, 64 ms; any notation within 0.05, "ms" allowed);
`grep 200` averages 8 lines to 360.75 (410.14 without the 404 line), all 2xx give 130.71,
every line 293.5."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402


def as_ms(text: str) -> str:
    """One number, optionally followed by "ms", rounded to one decimal; anything else as is."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(?:ms)?\s*", text)
    return "%.1f" % round(float(m.group(1)), 1) if m else text


SPEC = FileGoal(outputs={"avg_200.txt": "134.2"}, normalize=as_ms, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
