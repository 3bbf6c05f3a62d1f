"""MEMO_UPPER.txt = memo.txt upper-cased, blank lines kept; memo.txt unchanged."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

SPEC = FileGoal(outputs={"MEMO_UPPER.txt": inputs(__file__)["memo.txt"].upper()})

if __name__ == "__main__":
    main(SPEC, __file__)
