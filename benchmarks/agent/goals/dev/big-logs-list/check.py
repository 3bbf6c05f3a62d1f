"""big_logs.txt = app.log, error.log, old.log, slow.log (query.log is exactly 1024 bytes;
older.log.1 and notes.txt are not .log files)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402

SPEC = FileGoal(outputs={"big_logs.txt": "app.log\nerror.log\nold.log\nslow.log\n"},
                trailing_ws=True, kind="multistep")

if __name__ == "__main__":
    main(SPEC, __file__)
