"""What opening the sealed answers costs a worker: AES-256-CTR (OpenSSL, through ctypes) against SHAKE-128.

    python benchmarks/seal_cost.py [--rounds 5] [--record]

Fair grading hands each student's worker the reference's answers to the kit
check's callbacks, each XORed with a keystream whose key is a digest of its
question (``grader.sandbox.frames.seal``); the worker opens every answer its
code asks for. The answers are those of the kit's check of this checkout's
reference (made here in a scratch cache, as a first ``grade`` makes them), so
the sizes are the real ones. Timed: one pass of ``seal`` over every answer,
once with the keystream the kit uses where OpenSSL is reached (AES-256-CTR)
and once with the fallback (SHAKE-128), in process CPU seconds, the median
of ``--rounds``. A student of every part opens about as much as the table
holds (a grade of the reference, profiled with py-spy, spent 0.13 core-s per
student in SHAKE-128 before: about a twentieth of it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import record  # noqa: E402

from grader.sandbox import frames, sealed  # noqa: E402


def answers(cache: Path) -> list[tuple[bytes, bytes]]:
    """(key, sealed answer) of every answer the kit's check keeps, the check run here if it was not (a grade)."""
    files = sorted((cache / "attention-kit" / "answers").glob("*.frame"))
    if not files:
        from grader.grading.samples import _copy_reference

        one = cache / "class"
        _copy_reference(one / "copy00")
        subprocess.run([sys.executable, "-m", "grader", "grade", str(one), "--out", str(cache / "out"), "--part",
                        "all", "--jobs", "1"], cwd=ROOT, env={**os.environ, "XDG_CACHE_HOME": str(cache)},
                       stdout=subprocess.DEVNULL, check=True)
        files = sorted((cache / "attention-kit" / "answers").glob("*.frame"))
    table = sealed.read(files[-1])
    # The keys are the questions' (unknown here): any 32 bytes open as fast; the sizes are what matter.
    return [(os.urandom(32), bytes(blob)) for view in table.values() for blob, _ in view.values()]


def timed(blobs: list[tuple[bytes, bytes]], rounds: int) -> float:
    """The median CPU seconds of one ``seal`` of every blob."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for key, blob in blobs:
            frames.seal(key, blob)
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", type=Path, help="an XDG cache folder whose kit check was made (else a new one)")
    parser.add_argument("--record", action="store_true")
    options = parser.parse_args()
    if frames._AES is None:
        raise SystemExit("hashlib is not OpenSSL's here: the kit seals with SHAKE-128, nothing to compare")
    with tempfile.TemporaryDirectory() as scratch:
        blobs = answers(options.cache or Path(scratch))
    size = sum(len(blob) for _, blob in blobs)
    aes = timed(blobs, options.rounds)
    aes_cipher = frames._AES
    try:
        frames._AES = None
        shake = timed(blobs, options.rounds)
    finally:
        frames._AES = aes_cipher
    summary = (f"{len(blobs)} sealed answers, {size / 2**20:.1f} MiB: opened in {aes:.3f} CPU-s with AES-256-CTR, "
               f"{shake:.3f} with SHAKE-128 ({shake / aes:.1f}x)")
    print(summary)
    if options.record:
        record(__file__, summary, {"answers": len(blobs), "mib": round(size / 2**20, 1), "aes_cpu_s": round(aes, 4),
                                   "shake_cpu_s": round(shake, 4), "ratio": round(shake / aes, 2)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
