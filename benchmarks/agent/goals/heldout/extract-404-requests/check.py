"""not_found.log = the 4 lines whose status field is 404, in order (`grep 404` also takes the
/errors/404.html, ?page=404 and size-404 lines)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

lines = inputs(__file__)["access.log"].splitlines()
expected = "".join(line + "\n" for line in lines if line.split('" ')[-1].split()[0] == "404")
SPEC = FileGoal(outputs={"not_found.log": expected})

if __name__ == "__main__":
    main(SPEC, __file__)
