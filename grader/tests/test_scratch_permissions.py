"""A worker's copy of its submission is its own user's alone, on every plan (namespaces or none).

Without namespaces (``grade --container``, Gradescope where Docker cannot start bubblewrap) every worker's scratch
folder lies on the one file system, and its path is on the worker's command line, which ``/proc`` shows to every
user. A hostile round read the reference's worker's folder (all of ``solutions/``) from a student's worker there,
and sent it back in its feedback. Here two workers are started one by one, as those plans start them, and a third
user (as a student's other worker runs) tries to list and read their modules.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.sandbox import limits
from grader.sandbox.process import WorkerProcess
from grader.tests.waiting import HANG_SECONDS

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="workers of users of their own need root")

# Run by the stranger with the system's shell (the kit's interpreter may be unreadable to other users): what it can
# list or read of each path, nothing when it can do neither.
READ_AS = ('for path in "$@"; do if [ -d "$path" ]; then ls "$path" >/dev/null 2>&1 && echo "listed $path"; '
           'else cat "$path" >/dev/null 2>&1 && echo "read $path"; fi; done')


def test_no_other_user_lists_or_reads_a_workers_modules(tmp_path):
    modules = {exercise.module_file for exercise in load_curriculum().exercises}
    plan = limits.Plan("container", limits.fresh_uid(), "the container (a test) + an unprivileged user per worker")
    workers = [WorkerProcess(ROOT / "solutions", modules, plan, limits.Limits(), None) for _ in range(2)]
    try:
        for worker in workers:
            worker.spawn(0)  # (it may not get far: its interpreter may be unreadable to its user; no matter)
        paths = []
        for worker in workers:
            folder = worker.scratch / "modules"
            paths += [str(folder), *map(str, sorted(folder.iterdir()))]  # (beside it: the worker's public code)
        stranger = limits.fresh_uid()

        def as_stranger() -> None:
            os.setgid(limits.UNPRIVILEGED_GID)
            os.setuid(stranger)

        done = subprocess.run(["/bin/sh", "-c", READ_AS, "sh", *paths], capture_output=True, text=True,
                              preexec_fn=as_stranger, timeout=HANG_SECONDS, check=False)
        assert done.stdout.strip() == "", done.stdout[:2000]
        # The same shell as the workers' own users: each reads its own modules (the check above can fail).
        own = subprocess.run(["/bin/sh", "-c", READ_AS, "sh", *map(str, (workers[0].scratch / "modules").iterdir())],
                             capture_output=True, text=True, preexec_fn=lambda: (os.setgid(limits.UNPRIVILEGED_GID),
                                                                                 os.setuid(workers[0].uid)),
                             timeout=HANG_SECONDS, check=False)
        assert "softmax.py" in own.stdout, own.stdout + own.stderr
        for worker in workers:  # how: as the fork server hands a forked worker its modules
            folder = worker.scratch / "modules"
            status = folder.stat()
            assert status.st_uid == worker.uid and stat.S_IMODE(status.st_mode) == 0o500, (worker.uid, status)
            assert all(path.stat().st_uid == worker.uid and stat.S_IMODE(path.stat().st_mode) == 0o400
                       for path in folder.iterdir())
    finally:
        for worker in workers:
            worker.stop(False, lambda: None)
            worker.remove()
