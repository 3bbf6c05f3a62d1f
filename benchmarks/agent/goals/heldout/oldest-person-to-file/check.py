"""oldest.txt = Walter,71 (spaces around the comma and case are free); the tortoise's 96 is a
pet's age; Greta (66) is the runner-up."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"oldest.txt": "Walter,71\n"},
                normalize=lambda s: re.sub(r"\s*,\s*", ",", s.strip()).lower(), kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
