"""todo_files.txt = app.js, io.py, main.py, routes.py (TODO-list.md only has it in its name, fmt.py
only in lower case)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"todo_files.txt": "app.js\nio.py\nmain.py\nroutes.py\n"}, trailing_ws=True,
                kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
