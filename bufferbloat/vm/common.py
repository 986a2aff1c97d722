"""What every part of the VM's host side shares: the checkout and its ``vm/`` directory,
the image cache, the errors, the host tools, progress output, the locks, and how a
process we started is stopped."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from bufferbloat.core import paths, signals

#: the checkout (the VM shares it as /bb; None for an installed package, whose commands
#: share their results directory: bufferbloat.run.where) and the guest's files
REPO_ROOT = paths.SOURCE_ROOT
VM_DIR = paths.VM_DIR
DEFAULT_CACHE_DIR = "/var/cache/bufferbloat-vm"
CACHE_ENV = "BUFFERBLOAT_VM_CACHE"
#: host tool -> Debian package providing it
REQUIRED_TOOLS = {
    "debootstrap": "debootstrap",
    "qemu-system-x86_64": "qemu-system-x86",
    "mkfs.ext4": "e2fsprogs",
}
SYS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
Progress = Callable[[str], None]


class VMError(Exception):
    """A failure of the VM tooling; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class MissingTool(VMError):
    """A host tool or prerequisite is missing: the message names the fix. Exit code 2."""

    exit_code = 2


class BuildError(VMError):
    """The image build failed; the message ends with the tail of the build log."""


def stderr(msg: str) -> None:
    """Progress to stderr (the default)."""
    print(msg, file=sys.stderr, flush=True)


def quiet(msg: str) -> None:
    """No progress output."""


def cache_dir() -> Path:
    """The image cache directory (env BUFFERBLOAT_VM_CACHE); never inside the checkout."""
    path = Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR).resolve()
    if REPO_ROOT is not None and (path == REPO_ROOT or REPO_ROOT in path.parents):
        raise VMError(f"{CACHE_ENV}={path} is inside the checkout {REPO_ROOT}: "
                      f"choose a directory outside it (default {DEFAULT_CACHE_DIR})")
    return path


def check_tools(tools: dict[str, str] = REQUIRED_TOOLS) -> None:
    """MissingTool naming the Debian packages to install, unless every tool is there."""
    missing = [(t, pkg) for t, pkg in tools.items()
               if not shutil.which(t, path=os.environ.get("PATH", "") + ":" + SYS_PATH)]
    if missing:
        names = ", ".join(t for t, _ in missing)
        pkgs = " ".join(sorted({p for _, p in missing}))
        raise MissingTool(f"missing host tool(s): {names}; install them with: "
                          f"apt-get install {pkgs}")


def tool(name: str) -> str:
    """The path of host tool ``name`` (the system directories searched too)."""
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + SYS_PATH) or name


@contextlib.contextmanager
def locked(path: Path, progress: Progress, waiting: str | None = None):
    """Hold an exclusive lock on ``path`` for the block (saying ``waiting`` while another
    process holds it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(waiting or f"vm: waiting for another build of the VM image ({path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def stop_process(proc: subprocess.Popen) -> None:
    """Stop a process WE started (qemu, a build step), by its PID: SIGTERM, then SIGKILL
    after 10 s."""
    signals.stop_process(proc, grace_s=10.0, group=False)
