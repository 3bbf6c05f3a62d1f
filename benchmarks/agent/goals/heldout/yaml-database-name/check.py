"""orders_prod; the other "name:" values: storefront (app), orders_test (test_database),
legacy_orders (commented out)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lib"))
from check_util import Question, main  # noqa: E402

SPEC = Question(expected="orders_prod", distractors=["orders_test", "legacy_orders", "storefront"])

if __name__ == "__main__":
    main(SPEC, __file__)
