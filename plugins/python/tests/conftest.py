"""Puts the SDK and the plugins on sys.path, as the component build does."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT / "sdk", ROOT / "static-site", ROOT / "noticeboard"):
    sys.path.insert(0, str(path))
