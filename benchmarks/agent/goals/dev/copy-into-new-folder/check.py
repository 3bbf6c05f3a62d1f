"""backup/todo.txt must equal notes/todo.txt; the inputs stay as they are."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

SPEC = FileGoal(outputs={"backup/todo.txt": inputs(__file__)["notes/todo.txt"]})

if __name__ == "__main__":
    main(SPEC, __file__)
