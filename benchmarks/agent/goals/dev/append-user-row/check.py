"""members.csv = the original rows, then `carol,carol@example.com,editor` on its own last line
(the original has no final newline; gluing the row onto dmitri's line fails)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

original = inputs(__file__)["members.csv"]
SPEC = FileGoal(outputs={"members.csv": original.rstrip("\n") + "\ncarol,carol@example.com,editor\n"},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
