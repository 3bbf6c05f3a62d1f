"""todo_left.txt = order boxes, label the cables, take meter readings, update the address at the
bank (in order); not the prose line quoting "- [ ]", not "tell the landlord" ([X]), not
notes/ideas.md's item."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"todo_left.txt": "order boxes\nlabel the cables\ntake meter readings\n"
                         "update the address at the bank\n"},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
