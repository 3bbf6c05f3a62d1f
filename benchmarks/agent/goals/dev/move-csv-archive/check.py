"""archive/{jan,feb,mar}.csv with the original contents; the three gone from inbox/;
inbox/notes.csv.txt, inbox/README and inbox/old/dec.csv untouched (subfolder files may either stay
or move: "in inbox/" is read as directly in it; the reading that moves dec.csv too is accepted)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

src = inputs(__file__)
names = ["jan", "feb", "mar"]
SPEC = FileGoal(outputs={f"archive/{n}.csv": src[f"inbox/{n}.csv"] for n in names},
                absent=[f"inbox/{n}.csv" for n in names],
                allow_changed=[f"inbox/{n}.csv" for n in names] + ["inbox/old/dec.csv"])

if __name__ == "__main__":
    main(SPEC, __file__)
