"""The private folder where commbench's own ranks meet (their FileStore's file), removed when its run is over, and the
folders of runs that were killed removed at the next launch.

A launcher removes its folder on its way out (a normal end, a failure, a stop signal), but one killed by SIGKILL
(kill -9, the OOM killer, a cancelled CI job, a test's kill), or a process that leaves through os._exit, runs no
clean-up: its folder and the store file in it stayed in the temporary directory for good (34 in /tmp after a day of
test runs, `commbench-rdzv-*`). So each folder is locked (flock) from its creation for as long as its launcher lives,
or a rank forked from it (forked ranks share the open folder, and with it the lock); the kernel drops the lock when
the last of them ends, however it ends. Every new folder's creation first removes the folders of this kind nobody
locks: a live run's folder is never taken, a dead run's goes at the next launch.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import Iterator

# Not the older `commbench-rdzv-` prefix: those folders carry no lock, and a live run of an older commbench would
# look abandoned.
PREFIX = "commbench-rendezvous-"


def _open_folder(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)


def _same_folder(path: str, fd: int) -> bool:
    """`path` still names the folder open as `fd` (not removed by another launch since it was opened)."""
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def remove_abandoned(parent: str) -> list[str]:
    """Remove this user's rendezvous folders in `parent` that no live process locks (their launcher and its ranks
    are gone); the paths removed."""
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        try:
            if (not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False)
                    or entry.stat(follow_symlinks=False).st_uid != os.getuid()):
                continue
            fd = _open_folder(entry.path)
        except OSError:   # gone meanwhile, or not ours to open
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:   # locked: a live run's
            os.close(fd)
            continue
        try:
            if _same_folder(entry.path, fd):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
        finally:
            os.close(fd)
    return removed


@contextmanager
def rendezvous_folder() -> Iterator[str]:
    """A new private folder in the temporary directory (TMPDIR), locked while this process (or a process forked from
    it inside the block) lives, removed at the end of the block by this process only; abandoned ones are removed
    first."""
    parent = tempfile.gettempdir()
    remove_abandoned(parent)
    while True:
        path = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
        # another launch's remove_abandoned may take the folder between mkdtemp and this lock (it was unlocked):
        # gone before it is open (FileNotFoundError: seen once in a loaded suite run, as `bench` exit 1), or gone
        # once the lock is ours; either way a new one is made
        try:
            fd = _open_folder(path)
        except FileNotFoundError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_folder(path, fd):
            break
        os.close(fd)
    owner = os.getpid()
    try:
        yield path
    finally:
        if os.getpid() != owner:   # a process forked inside the block left it: the run may still use the folder
            os.close(fd)
            return
        # still locked while removed; what cannot be removed now (a signal mid-way) is unlocked once this process
        # ends, and the next launch removes it, so an error here must not replace the run's own outcome
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)
