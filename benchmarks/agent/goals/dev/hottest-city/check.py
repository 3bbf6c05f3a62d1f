"""hottest.txt = Madrid (31.2); Cairo (31.0) is the runner-up, Reykjavik wins a text sort."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"hottest.txt": "Madrid\n"}, normalize=lambda s: s.strip().lower(),
                kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
