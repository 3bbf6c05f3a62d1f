"""drafts/{intro,chapter1,chapter2}.md with the old contents; the .txt names gone;
notes.txt.bak, outline.md and other/todo.txt untouched."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

src = inputs(__file__)
names = ["intro", "chapter1", "chapter2"]
SPEC = FileGoal(outputs={f"drafts/{n}.md": src[f"drafts/{n}.txt"] for n in names},
                absent=[f"drafts/{n}.txt" for n in names])

if __name__ == "__main__":
    main(SPEC, __file__)
