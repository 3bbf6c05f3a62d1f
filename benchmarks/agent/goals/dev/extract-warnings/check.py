"""warnings.txt = the lines whose second field is WARNING, in order (`grep WARNING` also takes an
INFO and an ERROR line; `grep -i warning` more)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

lines = inputs(__file__)["server.log"].splitlines()
expected = "".join(line + "\n" for line in lines if line.split()[1:2] == ["WARNING"])
SPEC = FileGoal(outputs={"warnings.txt": expected})

if __name__ == "__main__":
    main(SPEC, __file__)
