"""tools/net/sync.sh; backup.sh (TIMEOUT_MS), deploy.sh (reads ${TIMEOUT}), check.sh (the timeout
command), lib/common.sh (CONNECT_TIMEOUT) do not assign it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="sync.sh",
                distractors=["backup.sh", "deploy.sh", "check.sh", "common.sh"])

if __name__ == "__main__":
    main(SPEC, __file__)
