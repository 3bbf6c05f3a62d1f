"""No db_port; near matches: DB_HOST=db.internal, APP_PORT=8000, REDIS_PORT=6379, and the default
PostgreSQL port 5432 (invented)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="key db_port", near=["db.internal", 8000, 6379, 5432, 3306])

if __name__ == "__main__":
    main(SPEC, __file__)
