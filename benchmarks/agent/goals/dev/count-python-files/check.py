r"""12 .py files; wrong counts: `grep '\.py'` also takes .pyc and .py.bak (15), `grep py` takes
pyproject.toml, example_py.txt and directories (17, 19), top level only (2), off by one."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected=12, distractors=[2, 10, 11, 13, 15, 17, 19])

if __name__ == "__main__":
    main(SPEC, __file__)
