"""What the Dask engine costs: core-seconds per submission of `grade --cluster local:2` against local grading.

    python benchmarks/cluster_cost.py [--n 12] [--small W] [--part 1] [--workers 2] [--repeat 2] [--record]

The same class (N copies of the reference) is graded by ``python -m grader
grade --force --jobs W`` (the local pool) and by ``... --cluster local:W`` (a
``LocalCluster`` of W worker processes that this command starts, each grading
in its own pool, sandboxed alike), alternately, in ``--repeat`` rounds. Core-
seconds come from the kernel's accounting of every process of the command
(``/proc/PID/stat``, sampled), told apart by process: the batch's own (with
``--cluster local:W`` also the scheduler, the nannies and the client, which run
in it), the Dask workers, the grading processes, and the sandboxes under them.
Each engine is also run on W copies (``--small``, default the number of workers W), so that its
fixed cost (starting the pool's W grading processes, or the cluster's W workers and their pools) is
told apart from its cost per submission:
``per_submission = (cost(N) - cost(W)) / (N - W)``. W copies, not one: a worker starts its
grading process (an interpreter, numpy, pytest and the suite collected) when its first student
comes, so with one copy only one of the W is started, and the others' start-up, which is no cost
of a submission, fell into the per-submission figure. The engine's overhead is
the ratio of the cluster's cost per submission over the local one (the target
is at most 1.1x), and of the totals for the N copies. On a shared machine the
other load moves single runs by a third, and moves runs close in time alike:
each round's ratio compares the runs of that round, and the figures are the
median of the rounds' ratios, with their spread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grade_throughput import DescendantSampler  # noqa: E402

from grader.grading.samples import _copy_reference  # noqa: E402

ROLES = ("batch", "dask workers", "grading processes", "sandboxes")


class RoleSampler(DescendantSampler):
    """CPU seconds of ``root`` and each of its descendants, summed by their part in grading (:data:`ROLES`)."""

    def __init__(self, root: int, cluster: bool) -> None:
        super().__init__(root=root)
        self.cluster = cluster
        self.roles: dict[tuple[int, int], str] = {}

    def _command(self, pid: int) -> bytes:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                return cmdline.read()
        except OSError:
            return b""

    def _role(self, parent: str, command: bytes) -> str:
        spawned = b"spawn_main" in command  # multiprocessing's spawned interpreter (a tracker has "resource_")
        if parent == "batch":
            return ("dask workers" if self.cluster else "grading processes") if spawned else "batch"
        if parent == "dask workers":  # its grading processes; its own helpers (the kit's isolation check) are its
            return "grading processes" if spawned else "dask workers"
        return "sandboxes"  # under a grading process: bwrap and the sandboxed workers

    def run(self) -> None:
        assert self.root is not None
        while not self.done.is_set():
            pending: list[tuple[int, str, bytes]] = [(self.root, "", b"")]
            while pending:
                pid, parent, parent_command = pending.pop()
                try:
                    with open(f"/proc/{pid}/stat", "rb") as stat:
                        fields = stat.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                key = (pid, int(fields[19]))
                self.seen[key] = max(self.seen.get(key, 0.0), (int(fields[11]) + int(fields[12])) / self.tick)
                command = self._command(pid)
                # A fork that has not yet exec'd shows its parent's command line: its role is told again later
                # (a process that has ended shows none: its role stays).
                if pid == self.root:
                    self.roles[key] = "batch"
                elif key not in self.roles or command not in (parent_command, b""):
                    self.roles[key] = self._role(parent, command)
                pending.extend((child, self.roles[key], command) for child in self._children(pid))
            self.done.wait(self.interval)

    def by_role(self) -> dict[str, float]:
        found = dict.fromkeys(ROLES, 0.0)
        for key, seconds in self.seen.items():
            found[self.roles.get(key, "batch")] += seconds
        return found


def run(folder: Path, out: Path, part: str, engine: list[str], cluster: bool) -> dict[str, float]:
    """Core-seconds of one ``grade --force`` of ``folder`` with ``engine``'s options, by role and in ``total``."""
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "--force",
               "--part", part, *engine]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = RoleSampler(process.pid, cluster)
    sampler.start()
    _, errors = process.communicate()
    sampler.done.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"grade exited {process.returncode}: {' '.join(command)}\n{errors[-2000:]}")
    found = sampler.by_role()
    return {**found, "total": sum(found.values()), "load": os.getloadavg()[0]}


def spread(values: list[float]) -> dict[str, float]:
    """The median of ``values`` and their range."""
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="copies of the reference (default 12)")
    parser.add_argument("--part", default="1", help="the part graded (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="grading processes / Dask workers (default 2)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds: runs of each engine and size (default 2)")
    parser.add_argument("--small", type=int, default=None,
                        help="copies of the small batch that tells the fixed cost apart (default: --workers)")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    args = parser.parse_args()
    small = args.small or args.workers
    if not 1 <= small < args.n:
        parser.error(f"--small {small}: give 1 <= small < --n ({args.n})")
    engines = {"local": ["--jobs", str(args.workers)], "cluster": ["--cluster", f"local:{args.workers}"]}
    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="cluster-cost-") as scratch:
        classes = {}
        for size in (small, args.n):
            classes[size] = Path(scratch) / f"class{size}"
            for index in range(size):
                _copy_reference(classes[size] / f"copy{index:02d}")
        for _ in range(args.repeat):
            for size, folder in classes.items():
                for name, options in engines.items():  # alternately: the machine's load falls on both alike
                    found = run(folder, Path(scratch) / f"out-{name}-{size}", args.part, options, name == "cluster")
                    runs.setdefault(f"{name}-{size}", []).append(found)
                    print(f"{name}, {size} submission(s): {found['total']:.1f} core-s ("
                          + ", ".join(f"{role} {found[role]:.2f}" for role in ROLES) + f"), load {found['load']:.1f}",
                          flush=True)
    rounds = range(args.repeat)

    def each(name: str, index: int, role: str = "total") -> float:
        return (runs[f"{name}-{args.n}"][index][role] - runs[f"{name}-{small}"][index][role]) / (args.n - small)

    per_submission = {name: spread([each(name, index) for index in rounds]) for name in engines}
    ratio_each = spread([each("cluster", index) / each("local", index) for index in rounds])
    ratio_total = spread([runs[f"cluster-{args.n}"][index]["total"] / runs[f"local-{args.n}"][index]["total"]
                          for index in rounds])
    fixed = {name: spread([runs[f"{name}-{small}"][index]["total"] - small * each(name, index) for index in rounds])
             for name in engines}
    # Where the core-seconds go: each role's cost per submission and in one submission's batch (medians).
    by_process = {name: {role: {"per_submission": round(statistics.median(each(name, index, role) for index in rounds),
                                                        3),
                                "small_batch": round(statistics.median(run[role] for run in runs[f"{name}-{small}"]),
                                                     2)}
                         for role in ROLES} for name in engines}
    loads = spread([run["load"] for values in runs.values() for run in values])
    figures: dict[str, object] = {
        "n": args.n, "small": small, "part": args.part, "workers": args.workers, "repeat": args.repeat,
        "runs": {key: [round(run["total"], 2) for run in values] for key, values in runs.items()},
        "per_submission": per_submission, "ratio_per_submission": ratio_each, "ratio_total": ratio_total,
        "fixed": fixed, "by_process": by_process, "load_average": loads}
    extra = {role: round(by_process["cluster"][role]["per_submission"] - by_process["local"][role]["per_submission"], 3)
             for role in ROLES}
    summary = (f"part {args.part}, {args.n} copies of the reference (fixed cost from {small}), {args.workers} workers, "
               f"{args.repeat} rounds: "
               f"local:{args.workers} over the local pool {ratio_each['median']}x per submission "
               f"({ratio_each['min']}-{ratio_each['max']}x over the rounds; {per_submission['cluster']['median']} vs "
               f"{per_submission['local']['median']} core-s) and {ratio_total['median']}x in total "
               f"({ratio_total['min']}-{ratio_total['max']}x); per submission the cluster adds "
               + ", ".join(f"{value:+.3f} core-s in the {role}" for role, value in extra.items())
               + f"; its fixed cost {fixed['cluster']['median']} core-s (the pool's {fixed['local']['median']}); "
               f"load {loads['min']:.1f}-{loads['max']:.1f}")
    print(summary)
    if args.record:
        from _record import record

        record(__file__, summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
