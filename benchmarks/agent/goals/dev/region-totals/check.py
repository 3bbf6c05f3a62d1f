"""region_totals.csv = east,9 / north,31 / south,8 (case and spaces ignored; names lower case;
an integer total may be written 9 or 9.0)."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402


def _norm(text: str) -> str:
    lines = [re.sub(r"\s*,\s*", ",", ln.strip().lower()) for ln in text.strip().splitlines()]
    return "\n".join(re.sub(r"\.0+$", "", ln) for ln in lines if ln != "region,total")


SPEC = FileGoal(outputs={"region_totals.csv": "east,9\nnorth,31\nsouth,8\n"}, normalize=_norm,
                kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
