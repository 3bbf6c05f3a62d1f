"""Priya Raman (shop.get_issue 1042); Marco Bianchi has 1041 and 1043."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "agent" / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="Priya Raman", distractors=["Marco Bianchi", "Ana Souza"])

if __name__ == "__main__":
    main(SPEC, __file__)
