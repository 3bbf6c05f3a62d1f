"""No backups_2023/; near matches: backups_2022/ holds 4 files, backups_2024/ holds 2."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="folder backups_2023", near=[4, 6])

if __name__ == "__main__":
    main(SPEC, __file__)
