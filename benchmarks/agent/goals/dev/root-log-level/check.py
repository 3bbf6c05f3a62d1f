"""app/conf/logging.conf = the original with only [logger_root]'s level=DEBUG made WARNING
(spaces around "=" are free); [logger_db], [handler_console] and app/conf/app.conf keep DEBUG,
the comment line stays."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402

original = inputs(__file__)["app/conf/logging.conf"]
marker = "[logger_root]\nlevel=DEBUG\n"
assert original.count(marker) == 1
expected = original.replace(marker, "[logger_root]\nlevel=WARNING\n")


def tidy(text: str) -> str:
    return "\n".join(re.sub(r"^([\w.]+)\s*=\s*", r"\1=", line.rstrip())
                     for line in text.strip("\n").split("\n"))


SPEC = FileGoal(outputs={"app/conf/logging.conf": expected}, normalize=tidy)

if __name__ == "__main__":
    main(SPEC, __file__)
