"""No recorded p99 latency; near matches: the p99 SLO target 500, the worst p95 412 (/api/orders),
the worst p50 88."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="a recorded p99 latency", near=[500, 412, 88])

if __name__ == "__main__":
    main(SPEC, __file__)
