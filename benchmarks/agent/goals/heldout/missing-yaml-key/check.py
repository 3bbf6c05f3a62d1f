"""No max_connections; values of near keys: 10 (max_wal_senders), 20 (pool.size), 300
(pool.max_lifetime_s), and PostgreSQL's default 100 (invented). superuser_reserved_connections=3
and max_idle=4 are left out: numbers that small occur in honest answers."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="key max_connections", near=[10, 20, 300, 100])

if __name__ == "__main__":
    main(SPEC, __file__)
