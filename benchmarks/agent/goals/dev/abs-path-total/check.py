"""total.txt holds 250.00 (any notation of 250); a naive comma split gives 129.50 + ..."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, main  # noqa: E402



def as_number(text: str) -> str:
    """Any notation of one number (250, 250.0, 250.00) compares equal; anything else as is."""
    try:
        return "%g" % float(text.strip())
    except ValueError:
        return text


SPEC = FileGoal(outputs={"total.txt": "250"}, normalize=as_number)

if __name__ == "__main__":
    main(SPEC, __file__)
