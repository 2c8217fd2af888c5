"""Where a demo's picture goes: the check both ``attention-kit demo`` pictures make before drawing.

``demo`` (the heatmaps) and ``demo_explain`` (``demo --explain``) both write
a PNG with matplotlib; this module holds what they share, so that neither
imports the other for it.
"""

from __future__ import annotations

import sys
from pathlib import Path


def picture_target(out: str, what: str) -> tuple[Path | None, int]:
    """Where a picture goes, or ``(None, exit status)`` after saying why it cannot be drawn.

    Parameters
    ----------
    out : str
        The ``--out`` path the student gave (or the default).
    what : str
        Names the picture in the message ("heatmap", "picture").

    Returns
    -------
    tuple of (pathlib.Path or None, int)
        The path and 0; or None and the exit status: 1 without matplotlib (the
        message says how to get it), 2 for a folder that does not exist (a usage error).
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f'No {what}: matplotlib is not installed. Install the plot extra: pip install -e ".[plot]" '
              "(or pip install matplotlib).")
        return None, 1
    path = Path(out)
    if path.parent and not path.parent.is_dir():
        print(f"attention-kit demo: --out {out}: folder {path.parent} does not exist", file=sys.stderr)
        return None, 2
    return path, 0
