"""What a worker without namespaces (``--container``) leaves in the folders every user may write in is removed.

A hostile round: a submission wrote 20 files of 1 MiB into /dev/shm (the machine's memory), /tmp and /var/tmp;
they outlived its worker and the batch (a worker may end and be replaced many times: each left its own).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from grader.sandbox import limits as confine
from grader.sandbox import process


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user need root")
def test_what_a_workers_user_left_in_shared_folders_is_removed_and_nothing_else():
    uid = confine.fresh_uid()
    shared = Path(tempfile.mkdtemp(prefix="attention-kit-shared-"))
    outside = Path(tempfile.mkdtemp(prefix="attention-kit-outside-"))
    try:
        (outside / "keep").write_text("root's")
        left = shared / "left"
        left.write_bytes(b"x" * 4096)
        folder = shared / "folder"
        (folder / "deeper").mkdir(parents=True)
        (folder / "deeper" / "file").write_text("x")
        link = shared / "link"
        link.symlink_to(outside)
        mine = shared / "the-graders"
        mine.write_text("another user's")
        for path in (left, folder, folder / "deeper", folder / "deeper" / "file"):
            os.chown(path, uid, confine.UNPRIVILEGED_GID)
        os.lchown(link, uid, confine.UNPRIVILEGED_GID)
        process.remove_leftovers(uid, (str(shared),))
        assert sorted(p.name for p in shared.iterdir()) == ["the-graders"]
        assert (outside / "keep").read_text() == "root's"  # a link is removed, never followed
    finally:
        confine.release_uid(uid)
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


def test_the_shared_folders_are_those_of_a_linux_machine():
    assert set(process.SHARED_WRITABLE) >= {"/tmp", "/dev/shm", "/var/tmp"}


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/proc/sysvipc/shm"), reason="another user needs root")
def test_the_system_v_ipc_a_workers_user_left_is_removed():
    """A hostile round: 32 MiB of System V shared memory and a message queue outlived the worker and the batch."""
    import ctypes

    uid = confine.fresh_uid()
    libc = ctypes.CDLL(None, use_errno=True)
    keys = (0x4B1D0000 + os.getpid() % 4096, 0x4B1E0000 + os.getpid() % 4096, 0x4B1F0000 + os.getpid() % 4096)

    def made() -> list[str]:
        return [row for kind in ("shm", "msg", "sem")
                for row in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
                if int(row.split()[0]) in keys]

    try:
        child = os.fork()
        if child == 0:
            try:
                os.setresgid(confine.UNPRIVILEGED_GID, confine.UNPRIVILEGED_GID, confine.UNPRIVILEGED_GID)
                os.setresuid(uid, uid, uid)
                libc.shmget(keys[0], 1 << 20, 0o1600)  # IPC_CREAT
                libc.msgget(keys[1], 0o1600)
                libc.semget(keys[2], 1, 0o1600)
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        assert len(made()) == 3
        process.remove_leftovers(uid, ())
        assert made() == []
    finally:
        confine.release_uid(uid)


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user need root")
def test_what_a_workers_user_left_in_a_folder_every_user_may_write_in_is_removed():
    """A hostile round: a file in a world-writable folder below /tmp (/tmp/.X11-unix on a systemd machine; a
    folder another worker made) outlived the batch. Root's own files there, and closed folders, are left alone."""
    uid = confine.fresh_uid()
    shared = Path(tempfile.mkdtemp(prefix="attention-kit-shared-"))
    try:
        x11 = shared / ".X11-unix" / "deeper"
        x11.mkdir(parents=True)
        for folder in (x11.parent, x11):
            os.chmod(folder, 0o1777)
        closed = shared / "closed"
        closed.mkdir(mode=0o755)
        for path in (x11.parent / "left", x11 / "left", closed / "not-its-folder"):
            path.write_text("x")
            os.chown(path, uid, confine.UNPRIVILEGED_GID)
        (x11 / "X0").write_text("root's")
        process.remove_leftovers(uid, (str(shared),))
        assert sorted(p.name for p in x11.parent.iterdir()) == ["deeper"]
        assert sorted(p.name for p in x11.iterdir()) == ["X0"]
        assert (closed / "not-its-folder").exists()  # it could not have written there: someone else did
    finally:
        confine.release_uid(uid)
        shutil.rmtree(shared, ignore_errors=True)
