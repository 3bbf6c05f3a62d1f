"""lists/books.md = a markdown table: the header title|author|year, a delimiter row, then the four
books with the commas inside the titles kept and no quotes. Cell padding, outer pipes and the
dashes' count/alignment colons are free."""
import csv
import io
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import FileGoal, inputs, main  # noqa: E402


def table(text: str) -> str:
    """One line per row: the cells stripped, joined by "|"; a delimiter row becomes "---"."""
    rows = []
    for line in text.strip("\n").split("\n"):
        s = line.strip()
        if s.startswith("|"):
            s = s[1:]
        if s.endswith("|"):
            s = s[:-1]
        cells = [c.strip() for c in s.split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            cells = ["---"] * len(cells)
        rows.append("|".join(cells))
    return "\n".join(rows)


rows = list(csv.reader(io.StringIO(inputs(__file__)["lists/books.csv"])))
expected = "\n".join(["|".join(rows[0]), "|".join("---" for _ in rows[0])]
                     + ["|".join(r) for r in rows[1:]])
SPEC = FileGoal(outputs={"lists/books.md": expected}, normalize=table)

if __name__ == "__main__":
    main(SPEC, __file__)
