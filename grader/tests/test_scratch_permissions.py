"""A worker's copy of its submission is its own user's alone, and its user gains nothing, on every plan.

Without namespaces (``grade --container``, Gradescope where Docker cannot start bubblewrap) every worker's scratch
folder lies on the one file system, and its path is on the worker's command line, which ``/proc`` shows to every
user. A hostile round read the reference's worker's folder (all of ``solutions/``) from a student's worker there,
and sent it back in its feedback. Here two workers are started one by one, as those plans start them, and a third
user (as a student's other worker runs) tries to list and read their modules.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import numpy as np
import pytest

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.sandbox import limits
from grader.sandbox.process import WorkerProcess
from grader.sandbox.server import hand_over
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


def test_a_handover_removes_what_the_last_user_planted_and_changes_nothing_outside(tmp_path):
    # The last user of a folder owned it: links planted in it sent the hand-over's chmod, as root, to their targets
    # (a hostile round: the interpreter every worker runs made 0400, later students "not graded").
    target, kept = tmp_path / "target", tmp_path / "target-dir"
    target.write_text("not the student's", encoding="utf-8")
    kept.mkdir()
    os.chmod(target, 0o644)
    os.chmod(kept, 0o755)
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "softmax.py").write_text("x = 1\n", encoding="utf-8")
    (modules / "zz_link").symlink_to(target)
    (modules / "zz_link2").symlink_to(kept)
    (modules / "planted").mkdir()
    os.link(target, modules / "hard")  # (as root: allowed whoever owns the target)
    uid = limits.fresh_uid()
    os.chown(modules, uid, limits.UNPRIVILEGED_GID)  # as the last worker left it
    hand_over(modules, uid)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644 and target.stat().st_uid == 0
    assert stat.S_IMODE(kept.stat().st_mode) == 0o755 and kept.stat().st_uid == 0
    assert sorted(path.name for path in modules.iterdir()) == ["softmax.py"]
    status = (modules / "softmax.py").stat()
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (uid, 0o400)
    assert (modules.stat().st_uid, stat.S_IMODE(modules.stat().st_mode)) == (uid, 0o500)


NO_NEW_PRIVS = ("import numpy as np\n\n\ndef softmax(x, axis=-1):\n"
                "    with open('/proc/self/status', encoding='ascii') as status:\n"
                "        flag = [line.split()[1] for line in status if line.startswith('NoNewPrivs:')]\n"
                "    return np.array([float(flag[0]) if flag else -1.0])\n")


def test_a_worker_without_namespaces_can_gain_no_privileges(tmp_path, monkeypatch):
    # bubblewrap sets no_new_privs; without it the worker must: else a setuid program a worker's user made lets a
    # later worker become that user (out of reach of its own kill; another worker's user once ids come round).
    from grader.sandbox.proxy import IsolatedImplementation

    student = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", student, ignore=shutil.ignore_patterns("__pycache__"))
    (student / "softmax.py").write_text(NO_NEW_PRIVS, encoding="utf-8")
    monkeypatch.setenv(limits.SIMULATE_NO_BWRAP, "1")
    for cached in (limits.plan, limits.choose):
        cached.cache_clear()
    try:
        with IsolatedImplementation(student, policy="none") as implementation:
            assert implementation.plan.mode != "bwrap"
            flag = implementation.function("softmax", "softmax")(np.zeros(3))
    finally:
        monkeypatch.delenv(limits.SIMULATE_NO_BWRAP)
        for cached in (limits.plan, limits.choose):
            cached.cache_clear()
    assert list(flag) == [1.0], flag


def test_a_user_id_comes_round_only_once_its_worker_is_gone():
    # A hostile round ended its worker 65 times: the 65th got the id of the reference's worker, still running.
    held = limits.fresh_uid()  # a live worker's (the reference's)
    try:
        others = []
        for _ in range(3 * 64):  # workers started and stopped, many times round
            uid = limits.fresh_uid()
            others.append(uid)
            limits.release_uid(uid)
        assert held not in others and len(set(others)) > 32, len(set(others))  # (other tests' workers hold some)
    finally:
        limits.release_uid(held)
    again = []
    for _ in range(64):  # given back: it comes round again
        again.append(limits.fresh_uid())
        limits.release_uid(again[-1])
    assert held in again
