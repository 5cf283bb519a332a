"""A confinement inside the sandbox: what a process forked by a runner fork server
(runner/fork_server.py) does before it may run a problem's or a candidate's code, so that a
process forked from an interpreter that has already imported torch is confined as a freshly
started one is.

The fork server runs in a bubblewrap sandbox that sees the session's workspace, every
candidate's stage folder and the reference's folder, and keeps two capabilities (in bubblewrap's
user namespace, over the namespaces it owns): CAP_SYS_ADMIN, to make a runner's namespaces and
mounts, and CAP_SETPCAP, to empty its bounding set. Each runner forked from it enters
namespaces of its own (mount, pid, IPC, UTS, network): a private /tmp and /dev/shm, every folder
of the server's view it is not given covered by an empty read-only tmpfs (its own stage bound
back on top), a fresh /proc that shows its own pid namespace alone. Then, before any code of
the problem's or the candidate's, it drops every capability for good, so none of this can be
undone. A new user namespace is not used: bubblewrap's read-only covers of /proc would then be
locked, and no fresh /proc could be mounted (the CUDA driver fails, error 304, in a pid
namespace whose /proc is another's).

Linux only; every call raises OSError with the step that failed, which the server's probe turns
into a reason to start runners the slower way (a fresh sandbox each).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
from pathlib import Path

from gpu_workers.harness.sandbox.launch import outermost, within

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 4, 24
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _check(result: int, step: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{step}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    encode = lambda text: text.encode() if text else None  # noqa: E731
    _check(
        _libc.mount(encode(source), target.encode(), encode(fstype), flags, encode(data)),
        f"mount {target}",
    )


def _prctl(option: int, value: int = 0, step: str = "prctl") -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), step)


def stay_undumpable() -> None:
    """Run by the fork server on start: no process of the server's own namespace may be traced
    or have its memory read. Forked children inherit it."""
    _prctl(_PR_SET_DUMPABLE, 0, "non-dumpable")


def enter(keep: list[str], cover: list[str], tmp_bytes: int) -> None:
    """In a process just forked from the fork server: new namespaces (its children get the new
    pid namespace), then the mounts that leave it a private /tmp and /dev/shm, the folders of
    `cover` empty and read-only, and the folders of `keep` read-only as they were. What the
    server's sandbox bound below /tmp (software, the harness, the session's folders: a checkout
    often lies in /tmp) is carried onto the private /tmp."""
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWNET
    _check(_libc.unshare(flags), "unshare")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    private = _MS_NOSUID | _MS_NODEV
    carried = [
        point
        for point in _mount_points()
        if point != "/tmp"
        and within(Path(point), Path("/tmp"))
        and not any(within(Path(point), Path(c)) for c in cover)
    ]
    held = [str(path) for path in outermost([Path(p) for p in (*carried, *keep)])]
    # /dev/shm holds them while /tmp and the covers go on; then it is made anew.
    _mount("tmpfs", "/dev/shm", "tmpfs", private, "size=65536,mode=700")
    holders = {folder: f"/dev/shm/{index}" for index, folder in enumerate(held)}
    for folder, holder in holders.items():
        os.mkdir(holder)
        _mount(folder, holder, None, _MS_BIND | _MS_REC)
    _mount("tmpfs", "/tmp", "tmpfs", private, f"size={tmp_bytes},mode=1777")
    # Outer folders first, so a folder kept inside a covered one (a stage) lands on the cover.
    for folder in sorted([*held, *cover], key=lambda path: len(Path(path).parts)):
        os.makedirs(folder, exist_ok=True)
        if folder in holders:
            _mount(holders[folder], folder, None, _MS_BIND | _MS_REC)
            _mount(None, folder, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | private)
        else:
            _mount("tmpfs", folder, "tmpfs", private | _MS_NOEXEC, "size=65536,mode=755")
    for folder in cover:
        _mount(None, folder, None, _MS_REMOUNT | _MS_RDONLY | private | _MS_NOEXEC)
    _check(_libc.umount2(b"/dev/shm", _MNT_DETACH), "umount the holding /dev/shm")
    _mount("tmpfs", "/dev/shm", "tmpfs", private, f"size={tmp_bytes},mode=1777")


def mount_proc() -> None:
    """In the new pid namespace's first process: a /proc of that namespace, with bubblewrap's
    read-only covers of its system folders."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for name in ("sys", "sysrq-trigger", "irq", "bus"):
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, _MS_BIND | _MS_REC)
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID)


def _mount_points() -> list[str]:
    """This mount namespace's mount points (/proc/self/mountinfo's fifth field, unescaped)."""
    with open("/proc/self/mountinfo") as table:
        fields = [line.split(" ")[4] for line in table]
    return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f) for f in fields]


def die_with_parent() -> None:
    """The first thing a forked child does: it ends when the process that forked it does."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")


def drop_privileges() -> None:
    """Every capability of the new user namespace gone, for good (none comes back on exec),
    before candidate code runs."""
    with open("/proc/sys/kernel/cap_last_cap") as last:
        for cap in range(int(last.read()) + 1):
            _prctl(_PR_CAPBSET_DROP, cap, "drop the capability bounding set")
    _check(_libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient caps")
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, "no new privileges")
    _prctl(_PR_SET_DUMPABLE, 0, "non-dumpable")
