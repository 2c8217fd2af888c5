"""What does ``attention-kit similarity`` cost for a class? Wall time, CPU and peak memory for N submissions.

    python benchmarks/similarity_cost.py [--n 300] [--part 1|2|all] [--keep DIR] [--record]

Generates N synthetic submissions, one folder each with every module of the
course: the reference with a student's own edits on about two thirds of its
code lines (an extra operation appended, a helper line inserted, with numbers of
its own), so that most of each module is neither the reference nor anybody
else's, and edits that happen to coincide give the partial overlaps an honest
class has. Two of them (``student0001`` and ``student0002``) share every
module, the second with its names changed. Then runs ``python -m grader
similarity`` on them in a fresh process and prints its wall time, its CPU
time (user + system, ``getrusage`` of the child) and its peak resident memory,
and checks that the shared pair tops every exercise.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grader.curriculum import load  # noqa: E402

SUFFIXES = (" * 1", " + 0", " * 1.0", " - 0.0", ".copy()", ".astype(float)", " / 1", " + 0.0 * 2",
            " * (1 + 0)", ".squeeze()", " ** 1", " + (0 * 3)")
CODE_LINE = re.compile(r"^(\s+)(?!elif |else:|except|finally:|@|def |class |#)(\S.*)$")


def student_module(reference: str, rng: random.Random) -> str:
    """``reference`` with a student's edits: about two thirds of its code lines changed or preceded by a line."""
    lines, in_docstring, depth = [], False, 0
    for line in reference.splitlines():
        quotes = line.count('"""') % 2 == 1
        match = None if in_docstring or quotes or depth else CODE_LINE.match(line)
        if not in_docstring and not quotes:  # open brackets: the next lines continue this one
            depth = max(0, depth + sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}"))
        in_docstring ^= quotes
        if match and not depth and not line.rstrip().endswith(("\\", ":")) and rng.random() < 0.7:
            if match[2].startswith(("return ", "raise ")) or " = " in match[2] and rng.random() < 0.5:
                line = line.rstrip() + rng.choice(SUFFIXES)
            else:
                lines.append(f"{match[1]}check_{rng.randrange(1000)} = {rng.randrange(1, 100)} * {rng.random():.3f}")
        lines.append(line)
    return "\n".join(lines) + "\n"


def renamed(text: str) -> str:
    """``text`` with every ``check_N`` helper and a few common names changed (what a copier does)."""
    text = re.sub(r"\bcheck_(\d+)\b", r"tmp_\1", text)
    for old, new in (("scores", "s"), ("weights", "w"), ("mask", "m"), ("value", "val")):
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def make_class(folder: Path, n: int, exercises: list[str]) -> None:
    """N submission folders in ``folder``; student0002 is student0001 renamed."""
    references = {name: (ROOT / "solutions" / f"{name}.py").read_text(encoding="utf-8") for name in exercises}
    rng = random.Random(26)
    for index in range(1, n + 1):
        target = folder / f"student{index:04d}"
        target.mkdir(parents=True)
        for name, reference in references.items():
            if index == 2:
                text = renamed((folder / "student0001" / f"{name}.py").read_text(encoding="utf-8"))
            else:
                text = student_module(reference, rng)
            (target / f"{name}.py").write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="number of submissions (default 300)")
    parser.add_argument("--part", choices=("1", "2", "all"), default=None,
                        help="the course's exercises (default: the manifest's [course] part)")
    parser.add_argument("--keep", type=Path, default=None, help="write the class and the report here and keep them")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    part = args.part or load().part
    exercises = list(load().selected_names(part))
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="similarity-cost-"))
    try:
        submissions, out = scratch / "submissions", scratch / "report"
        shutil.rmtree(submissions, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        make_class(submissions, args.n, exercises)
        command = [sys.executable, "-m", "grader", "similarity", str(submissions), "--out", str(out),
                   "--part", part]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if finished.returncode != 0:
            print(finished.stdout + finished.stderr)
            return 1
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        peak_mb = after.ru_maxrss / 1024  # kilobytes on Linux; the largest child so far (this one)
        with (out / "similarity.csv").open(encoding="utf-8", newline="") as stream:
            rows = [row for row in csv.DictReader(stream) if row["table"] == "pair" and row["rank"] == "1"]
        tops = {row["exercise"]: (row["student"], row["other"], float(row["score"])) for row in rows}
        missed = [name for name in exercises if tops.get(name, ("", "", 0))[:2] != ("student0001", "student0002")]
        pairs = args.n * (args.n - 1) // 2
        print(f"{args.n} submissions, {len(exercises)} exercises (part {part}), {pairs} pairs each: "
              f"{wall:.1f} s wall, {cpu:.1f} s CPU, peak memory {peak_mb:.0f} MB")
        print("the shared pair tops " + ("every exercise" if not missed else f"all but {', '.join(missed)}"))
        if args.record:
            from _record import record

            record(__file__, f"{args.n} submissions, {len(exercises)} exercises: {cpu:.0f} s of CPU in one process "
                   f"({wall:.0f} s wall), peak memory {peak_mb:.0f} MB",
                   {"submissions": args.n, "part": part, "exercises": len(exercises), "pairs_per_exercise": pairs,
                    "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_rss_mb": round(peak_mb),
                    "shared_pair_on_top": not missed},
                   variant=f"part{part}" if args.part and args.part != load().part else "")
        return 0 if not missed else 1
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
