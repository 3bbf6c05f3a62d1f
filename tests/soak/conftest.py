"""The soak run reuses the chaos driver (tests/chaos/chaos_support.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
