"""Progress bars on stderr for the slow steps (weights synthesised, read from a checkpoint, copied to the
GPU or written to one; a Program validated): tqdm, drawn only while stderr is a terminal, so logs, pipes
and `--json` output stay clean (the bars never touch stdout)."""

from __future__ import annotations

import sys


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # stderr replaced or closed
        return False


def count_bar(total: int, what: str, unit: str, enabled: bool = True, **kwargs):
    """A bar counting `total` `unit`s (call .update(n), use as a context manager); a no-op when `enabled`
    is False or stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=unit, file=sys.stderr, disable=not (enabled and on_terminal()),
                leave=False, mininterval=0.25, **kwargs)


def bytes_bar(total: int, what: str, enabled: bool = True):
    """count_bar over `total` bytes, shown in kB, MB, GB."""
    return count_bar(total, what, "B", enabled, unit_scale=True, unit_divisor=1000)
