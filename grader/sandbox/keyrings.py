"""The kernel's keyrings, shut to a worker: a seccomp filter refuses the key system calls (else they are emptied).

Run by the worker only, in the sandbox (a copy beside ``worker.py``: ``limits.SANDBOX_MODULES``), once it has
dropped to its own user and before any student code. Standard library only.

A user's kernel keyrings outlive all its processes, and user ids come round again (``limits.fresh_uid``): a key
one worker left would reach a later worker of the same uid, another student's. Emptying them at every start
takes ``KEYCTL_GET_PERSISTENT``, which makes a persistent keyring for every new uid, kept by the kernel for
three days (the kit's test machine held a million and a half key users, each made under a kernel spin lock),
and ``request_key`` can have the kernel run a helper program outside the sandbox. So a worker gets a seccomp
filter that refuses ``add_key``, ``request_key`` and ``keyctl`` (EPERM), and every system call of another ABI
than the machine's own (the 32-bit ``int 0x80`` entry and x32 on x86_64, where the key calls have other
numbers). Where no filter can be installed (an unknown machine, a kernel without seccomp), the worker's
keyrings are emptied instead, as before.
"""

from __future__ import annotations

import ctypes
import os

# machine -> (the AUDIT_ARCH of its own ABI, add_key, request_key, keyctl, first number of a foreign sub-ABI)
ABIS = {"x86_64": (0xC000003E, 248, 249, 250, 0x40000000), "aarch64": (0xC00000B7, 217, 218, 219, None)}
SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}
EPERM, ENOSYS = 1, 38
_LOAD, _JEQ, _JGE, _RETURN = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter's instructions for ``machine`` (code, jump if true, jump if false, k); KeyError if unknown."""
    arch, *keys, foreign = ABIS[machine]
    checks = ([(_JGE, foreign)] if foreign is not None else []) + [(_JEQ, number) for number in keys]
    refuse = 5 + len(checks)  # the index of the last instruction
    head = [(_LOAD, 0, 0, 4), (_JEQ, 1, 0, arch), (_RETURN, 0, 0, _ERRNO | ENOSYS), (_LOAD, 0, 0, 0)]
    tests = [(code, refuse - (len(head) + index + 1), 0, k) for index, (code, k) in enumerate(checks)]
    return [*head, *tests, (_RETURN, 0, 0, _ALLOW), (_RETURN, 0, 0, _ERRNO | EPERM)]


def shut() -> str:
    """Refuse the key system calls to this process and its future children and threads, or empty its keyrings.

    Returns how: "refused" (the filter holds: a key call fails with EPERM), "emptied", or "" (no keyrings known
    here, or root's, which are never touched).
    """
    machine = os.uname().machine
    if machine not in ABIS or os.getuid() == 0:
        return ""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    keyctl = ABIS[machine][3]
    if _install(libc, machine) and libc.syscall(keyctl, 0, ctypes.c_long(-4), 0) == -1 \
            and ctypes.get_errno() == EPERM:  # KEYCTL_GET_KEYRING_ID of @u: refused, so the filter holds
        return "refused"
    user, user_session = ctypes.c_long(-4), ctypes.c_long(-5)
    persistent = libc.syscall(keyctl, 22, ctypes.c_long(-1), user)  # KEYCTL_GET_PERSISTENT, linked into @u
    for ring in ([ctypes.c_long(persistent)] if persistent >= 0 else []) + [user_session, user]:
        libc.syscall(keyctl, 7, ring)  # KEYCTL_CLEAR
    libc.syscall(keyctl, 8, user, user_session)  # KEYCTL_LINK: @u in @us again, as a new user's keyrings are
    return "emptied"


def _install(libc: ctypes.CDLL, machine: str) -> bool:
    """Install the filter on every thread of this process (no_new_privs first, which a filter needs)."""
    instructions = program(machine)
    array = (_Instruction * len(instructions))(*(_Instruction(*fields) for fields in instructions))
    filter_program = _Program(len(instructions), ctypes.cast(array, ctypes.POINTER(_Instruction)))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, program): all threads, or none
    return libc.syscall(SECCOMP_SYSCALL[machine], 1, 1, ctypes.byref(filter_program)) == 0
