"""A worker's kernel keyrings (``grader.sandbox.keyrings``): the key system calls refused, none left behind.

A user's keyrings outlive its processes and user ids come round again, so a key one worker leaves would reach a
later worker of the same uid; emptying them made a persistent keyring per new uid, which the kernel keeps for
days. Each test here fails where a worker can still make or find a key.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform

import pytest

from grader.sandbox import keyrings
from grader.tests import test_isolation

isolated = test_isolation.isolated  # the fixture: a planted submission's IsolatedImplementation, closed after

MACHINE = platform.machine()
KEY_CALLS = {"x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250},
             "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219}}
pytestmark = pytest.mark.skipif(MACHINE not in KEY_CALLS or os.getuid() != 0 or not os.path.exists("/proc/key-users"),
                                reason="written for x86_64 and aarch64 Linux, run as root (a worker's user is made)")


def _key_user(uid: int) -> bool:
    """Whether the kernel holds keys (a keyring) of ``uid``."""
    with open("/proc/key-users", encoding="ascii") as users:
        return any(line.split(":")[0].strip() == str(uid) for line in users)


def _keyless(candidates) -> int:
    """The first of ``candidates`` (user ids) the kernel holds no keys of: a worker of an older kit that emptied
    its keyrings made a persistent one for its uid, which the kernel keeps for days, and uids come round again."""
    with open("/proc/key-users", encoding="ascii") as users:
        held = {line.split(":")[0].strip() for line in users}
    found = next((uid for uid in candidates if str(uid) not in held), None)
    if found is None:
        pytest.skip("every user id tried has keys left by earlier workers")
    return found


def _in_a_child(uid: int, shut: bool, job) -> tuple[int, list[int]]:
    """Run ``job`` (it returns a list of ints) in a forked child as ``uid``, after ``keyrings.shut()`` if ``shut``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(uid)
            how = keyrings.shut() if shut else ""
            os.write(write, (" ".join(map(str, [how == "refused", *job()]))).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    _, status = os.waitpid(pid, 0)
    return status, [int(word == "True") if word in ("True", "False") else int(word) for word in text.split()]


def _key_calls() -> list[int]:
    """(result, errno) of each key call a worker could use to keep a key for a later one."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    numbers, found = KEY_CALLS[MACHINE], []
    for call, args in ((numbers["add_key"], (b"user", b"note", b"for the next worker", 19, ctypes.c_long(-4))),
                       (numbers["keyctl"], (22, ctypes.c_long(-1), ctypes.c_long(-4))),  # KEYCTL_GET_PERSISTENT
                       (numbers["keyctl"], (0, ctypes.c_long(-4), 1)),  # KEYCTL_GET_KEYRING_ID of @u, made
                       (numbers["request_key"], (b"user", b"note", None, ctypes.c_long(0)))):
        ctypes.set_errno(0)
        found += [libc.syscall(call, *args), ctypes.get_errno()]
    return found


def test_every_key_call_is_refused_and_no_keyring_is_made():
    worker_uid = _keyless(range(1_499_999_000, 1_499_999_500))
    status, (refused, *calls) = _in_a_child(worker_uid, True, _key_calls)
    assert status == 0 and refused == 1, (status, refused)
    assert calls == [-1, 1] * 4, f"(result, errno) of add_key, two keyctl and request_key: {calls}"
    assert not _key_user(worker_uid), "the kernel made keys for the worker's user"
    # The same calls without the filter make the user's keyring: the check above can fail.
    other = _keyless(range(worker_uid + 1, 1_499_999_500))
    status, (_, *calls) = _in_a_child(other, False, _key_calls)
    assert status == 0 and calls[0] >= 0 and _key_user(other), calls


def _i386_getpid() -> list[int]:
    """getpid through the 32-bit entry (``int 0x80``), where the key calls have other numbers (286 to 288)."""
    code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (getpid); int 0x80; ret
    memory = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    memory.write(code)
    entry = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(memory)))
    return [entry(), os.getpid()]


@pytest.mark.skipif(MACHINE != "x86_64", reason="the 32-bit entry is x86_64's")
def test_the_32_bit_entry_is_closed_too():
    status, (_, answer, pid) = _in_a_child(1_499_999_903, False, _i386_getpid)
    if status != 0 or answer != pid:
        pytest.skip("this kernel has no 32-bit entry (no IA32 emulation): nothing to close")
    status, (refused, answer, pid) = _in_a_child(1_499_999_904, True, _i386_getpid)
    assert status == 0 and refused == 1 and answer == -38, (status, answer, pid)  # -ENOSYS: no call of that ABI


PLANT = """
def softmax(x, axis=-1):
    import ctypes, os, platform
    numbers = {"x86_64": 248, "aarch64": 217}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    made = libc.syscall(numbers[platform.machine()], b"user", b"note", b"hello", 5, ctypes.c_long(-4))
    return [int(made), ctypes.get_errno(), os.getuid()]
"""


def test_a_graded_worker_can_make_no_key(isolated, monkeypatch):
    from grader.sandbox import limits

    tried = [limits.fresh_uid() for _ in range(8)]
    for reserved in tried:
        limits.release_uid(reserved)  # (fresh_uid reserves them: other tests' workers need them)
    uid = _keyless(tried)  # this machine may hold keys of earlier workers' uids
    monkeypatch.setattr(limits, "fresh_uid", lambda: uid)
    impl = isolated({"softmax": PLANT})
    made, error, uid = impl.function("softmax", "softmax")(None)
    assert (made, error) == (-1, 1), (made, error)
    assert uid == impl._worker.uid and not _key_user(uid), "a worker's start or its code made keys for its user"
