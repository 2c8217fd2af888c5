"""Does the batch process's memory grow with the class? Its peak (VmHWM) for a small and a large class.

    python benchmarks/batch_memory.py [--small 10] [--large 80] [--part 1] [--record]

Generates two classes as ``grade_throughput.py`` does (a third correct, the rest
spread over the mutant catalogue), grades each in a fresh ``python -m grader
grade --force --jobs 2``, and reads the peak resident memory of that batch
process (``VmHWM`` in ``/proc/PID/status``, sampled until it exits; its grading
processes and the students' sandboxes are other processes, with limits of
their own). Issue 33 asks that it not grow with the class: the difference per
extra submission is printed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grade_throughput import make_class  # noqa: E402


def peak_kib(submissions: Path, out: Path, part: str) -> tuple[int, int]:
    """The batch process's peak resident memory in KiB, and its exit code."""
    command = [sys.executable, "-m", "grader", "grade", str(submissions), "--out", str(out), "--force",
               "--jobs", "2", "--part", part]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:  # it ended between the poll and the read
            pass
        time.sleep(0.1)
    return peak, process.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10, help="submissions of the small class (default 10)")
    parser.add_argument("--large", type=int, default=80, help="submissions of the large class (default 80)")
    parser.add_argument("--part", default="1", help="the part graded (default 1: the quickest)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args(argv)
    peaks = {}
    with tempfile.TemporaryDirectory() as scratch:
        for n in (args.small, args.large):
            folder = Path(scratch) / f"class{n}"
            folder.mkdir()
            make_class(folder, n)
            peaks[n], code = peak_kib(folder, Path(scratch) / f"out{n}", args.part)
            print(f"{n} submissions (part {args.part}): the batch process's peak {peaks[n] / 1024:.1f} MiB, "
                  f"exit {code}")
            if code != 0:
                return 1
    per = (peaks[args.large] - peaks[args.small]) / (args.large - args.small)
    print(f"growth: {per:.1f} KiB per extra submission")
    if args.record:
        from _record import record

        record(__file__, f"the batch process's peak {peaks[args.small] / 1024:.1f} MiB for {args.small} "
                         f"submissions, {peaks[args.large] / 1024:.1f} MiB for {args.large} (part {args.part}): "
                         f"{per:.1f} KiB per extra submission",
               {"small": args.small, "large": args.large, "part": args.part,
                "peak_small_kib": peaks[args.small], "peak_large_kib": peaks[args.large],
                "kib_per_submission": round(per, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
