"""What ``grader.quiet``'s frame of its own buys a pytest run nested in this process: CPU time in the kernel.

    python benchmarks/frame_room.py [--depths 0,20,40,60,80] [--record]

CPython 3.11 and 3.12 keep a thread's frames in 16 KiB chunks, mapped when a
call does not fit in the current one and unmapped as soon as that call
returns: a hot loop whose calls cross a chunk's end maps and unmaps a chunk
at every call. Where the end falls depends on how deep the run starts, so a
test suite nested in another pytest (the kit's own tests run the graded suite
on cheats and mistakes in process) met it at some depths and not others: a
numerical-gradient training cheat spent 16 of its 26 CPU-s in the kernel.
``grader.quiet.run_pytest`` therefore starts each run in a frame big enough to
get a chunk of 512 KB of its own, with room for every frame of the run under it.

This script runs one training test of exercise 9 on that cheat
(``grader/tests/cheats.py``, ``training-central-differences``) through
``grader.mutants.report.run_tests``, started at several extra depths, once
with the frame of its own and once without, and prints each run's user and
system CPU seconds. Without it the system time jumps at some depths; with it,
it stays near zero at every depth.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grader import quiet  # noqa: E402
from grader.mutants.report import run_tests  # noqa: E402
from grader.tests.cheats import CHEATS, plant  # noqa: E402

TEST = "test_train_returns_params_and_one_loss_per_step"


def at_depth(depth: int, call: object) -> object:
    """``call()``, ``depth`` Python frames further down the stack."""
    return at_depth(depth - 1, call) if depth else call()  # type: ignore[operator]


def measured(folder: Path, depth: int) -> tuple[float, float]:
    """(user, system) CPU seconds of one nested run of TEST on ``folder``, started ``depth`` frames down."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    run = at_depth(depth, lambda: run_tests(ROOT / "tests/test_09_training.py", folder, keyword=TEST))
    after = resource.getrusage(resource.RUSAGE_SELF)
    if run.exit_code not in (0, 1):  # type: ignore[attr-defined]
        raise SystemExit(f"pytest exited {run.exit_code}: {run.output[-2000:]}")  # type: ignore[attr-defined]
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="0,20,40,60,80", help="extra frames below each run (comma-separated)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    options = parser.parse_args()
    depths = [int(d) for d in options.depths.split(",")]
    roomy = quiet._in_a_chunk_of_its_own
    if roomy is quiet._room:
        print("this interpreter takes no frame of its own: nothing to compare")
        return 2
    figures: dict[str, object] = {"test": TEST, "depths": depths}
    with tempfile.TemporaryDirectory(prefix="frame-room-") as scratch:
        folder = plant(Path(scratch) / "cheat", CHEATS["training-central-differences"].code)
        for label, runner in (("own chunk", roomy), ("as it was", quiet._room)):
            quiet._in_a_chunk_of_its_own = runner
            rows = [measured(folder, depth) for depth in depths]
            for depth, (user, system) in zip(depths, rows, strict=True):
                print(f"{label}: depth +{depth}: {user:.2f} s user, {system:.2f} s system", flush=True)
            figures[label] = {"user_s": [round(u, 2) for u, _ in rows], "system_s": [round(s, 2) for _, s in rows]}
        quiet._in_a_chunk_of_its_own = roomy
    own, old = figures["own chunk"], figures["as it was"]
    summary = (f"system CPU-s of a nested numerical-gradient training at depths {options.depths}: at most "
               f"{max(own['system_s']):.2f} in a chunk of its own, up to {max(old['system_s']):.2f} without "  # type: ignore[index]
               f"(user {min(own['user_s']):.2f}-{max(own['user_s']):.2f})")  # type: ignore[index]
    print(summary)
    if options.record:
        from _record import record

        record(__file__, summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
