"""Loads the user's hidden-state dump patch into every Python process started with this
directory on PYTHONPATH (the lab sets it for the hs-dump-patch server only)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import hs_dump

hs_dump.install()
