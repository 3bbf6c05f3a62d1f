"""todo.txt = its 3 lines followed by the 3 lines of new_tasks.txt (a final newline optional);
new_tasks.txt and todo.txt.bak unchanged."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

src = inputs(__file__)
SPEC = FileGoal(outputs={"todo.txt": src["todo.txt"] + src["new_tasks.txt"] + "\n"},
                trailing_ws=True)

if __name__ == "__main__":
    main(SPEC, __file__)
