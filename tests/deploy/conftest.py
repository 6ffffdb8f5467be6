"""deploy/ is a folder of scripts, not a package: its modules import each other by name, as they do when
`make run` starts deploy/embedded.py."""

from __future__ import annotations

import sys
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
if str(DEPLOY) not in sys.path:
    sys.path.insert(0, str(DEPLOY))
