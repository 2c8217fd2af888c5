"""Write a benchmark's figures, with the date and the machine they were measured on.

Every benchmark script takes ``--record``: its figures then go to
``benchmarks/results/<script>.json``, and ``python -m grader.authoring.readme``
writes the README's benchmark table (and the speed figures of docs/) from
those files. So a figure in the docs is always one a script measured, with
when and where, never one typed by hand.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; elsewhere what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine() -> dict[str, object]:
    """Cores, CPU model, Python and numpy of this machine, and its load when measured."""
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:
        numpy_version = "not installed"
    info: dict[str, object] = {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "numpy": numpy_version,
        "system": f"{platform.system()} {platform.machine()}",
    }
    if hasattr(os, "getloadavg"):
        info["load_average"] = round(os.getloadavg()[0], 1)
    return info


def record(script: str, summary: str, figures: dict[str, object], variant: str = "") -> Path:
    """Write ``benchmarks/results/<script>.json`` (``<script>-<variant>.json`` for a variant); returns its path.

    ``summary`` is the short text the README shows (e.g. "1.52 s median over 5 runs"). ``variant`` names a
    configuration recorded beside the default one (e.g. ``part1``), which the README shows with
    ``<!-- benchmark:<script>-<variant> -->``.
    """
    name = Path(script).stem
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}{'-' + variant if variant else ''}.json"
    data = {
        "script": f"benchmarks/{name}.py",
        "arguments": sys.argv[1:],
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "summary": summary,
        "figures": figures,
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"recorded in {path.relative_to(RESULTS.parent.parent)}")
    return path
