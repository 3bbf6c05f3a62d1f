"""photo_counts.txt = 2021: 3, 2022: 5, holidays: 2, scans: 0 (spacing around ":" is free;
the sidecars *.jpg.json / *.jpg.txt and photos/cover.jpg do not count)."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402


def normalize(text: str) -> str:
    return "\n".join(re.sub(r"\s*:\s*", ": ", line.strip()) for line in text.strip().splitlines())


SPEC = FileGoal(outputs={"photo_counts.txt": "2021: 3\n2022: 5\nholidays: 2\nscans: 0\n"},
                normalize=normalize, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
