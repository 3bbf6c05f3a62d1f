"""data/archive/events_2022.json (9522 bytes); wrong picks: the runner-up events_2021.json, the
file with the most lines (raw/sensor.log), the biggest top-level file (customers.csv)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="events_2022.json",
                distractors=["events_2021.json", "sensor.log", "customers.csv"])

if __name__ == "__main__":
    main(SPEC, __file__)
