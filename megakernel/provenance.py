"""Where a result came from: the commit that produced it, stamped into every results JSON."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the checkout this package runs from


def git_commit() -> str:
    """The commit of the checkout this package runs from (not of the current directory), or GIT_COMMIT
    when set (the device's copy of the tree has no .git, so device runs pass it in); "unknown" rather
    than a wrong or empty value."""
    value = os.environ.get("GIT_COMMIT", "").strip()
    if not value:
        try:
            value = subprocess.run(["git", "rev-parse", "HEAD"], check=False, capture_output=True, text=True,
                                   cwd=REPO, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            value = ""
    return value if re.fullmatch(r"[0-9a-f]{7,40}", value) else "unknown"
