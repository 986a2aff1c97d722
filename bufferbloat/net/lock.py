"""The lock that keeps one emulated network per network namespace.

Mininet's names (h1, s0, s0-eth1) are the namespace's: a second network would collide
with, or tear down, the first. Networks in different namespaces have different locks
(:func:`bufferbloat.net.cleanup.network_paths`). The lock is an ``flock`` on a file that
holds its owner's PID. In a namespace of its own, a clean stop unlinks the file while
still holding it (and its directory when empty): a run that waited on the old file then
finds it replaced, and takes the one there now.
"""

import fcntl
import os
import time

from bufferbloat.core.errors import UsageError
from bufferbloat.net import isolation
from bufferbloat.net.cleanup import make_private_dirs, owns_directory

LOCK_WAIT_ENV = "BUFFERBLOAT_NETWORK_WAIT_S"  # how long to wait for another network


def take_lock(path):
    """Take the lock at ``path``: its open file, with this process's PID written in it
    (closing the file releases the lock). Another holder is waited for LOCK_WAIT_ENV
    seconds (default: not at all), then refused with a UsageError that names its PID."""
    wait_s = float(os.environ.get(LOCK_WAIT_ENV) or 0)
    deadline = time.monotonic() + wait_s
    while True:
        make_private_dirs(path)
        try:
            lock = open(path, "a+")
        except FileNotFoundError:     # its directory was just removed: again
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() < deadline:
                lock.close()
                time.sleep(0.5)
                continue
            lock.seek(0)
            owner = lock.read().strip() or "unknown"
            lock.close()
            where = "on this machine" if isolation.in_initial_netns() else \
                "in this network namespace"
            raise UsageError(f"another bufferbloat network is running {where} "
                             f"(pid {owner}); wait for it to finish (or set "
                             f"{LOCK_WAIT_ENV}=SECONDS to wait)") from None
        if _same_file(lock, path):
            break
        lock.close()    # its holder removed it on stop: take the one there now
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def remove_lock(path):
    """Remove the (held) lock file at ``path`` and its directory when empty, if the
    directory is this namespace's own (:func:`~bufferbloat.net.cleanup.owns_directory`):
    in a namespace of its own, a clean stop leaves nothing under /run. The initial
    namespace's lock stays."""
    if not owns_directory(path):
        return
    try:
        os.unlink(path)
        os.rmdir(os.path.dirname(path))
    except OSError:
        pass    # already gone, or another run's files are there: leave them


def _same_file(f, path):
    """True if open file ``f`` is still the file at ``path``."""
    try:
        return os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
