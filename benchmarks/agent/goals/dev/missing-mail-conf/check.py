"""No config/mail.conf; near matches: the template mail.conf.example's smtp port 587 and imap port
993, app.conf's port 8080."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Impossible, main  # noqa: E402

SPEC = Impossible(missing="file config/mail.conf", near=[587, 993, 8080])

if __name__ == "__main__":
    main(SPEC, __file__)
