"""The chaos suite's helpers (chaos_support.py) live next to it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
