"""Signals and the processes we start: the one home of both (standard library only: the
sampler, the UDP tool and the VM host side import it in their own processes).

This process's signals:

* :func:`terminate_on_sigterm`: SIGTERM becomes KeyboardInterrupt, so that ``finally``
  blocks tear down and record;
* :func:`deferred_signals`: SIGINT/SIGTERM (and a stall watchdog's SIGALRM) held during
  a block that must not be cut in two (a build, a teardown, the recording);
* :func:`handled`: handlers installed for a block and put back after it;
* :func:`alarm`: a SIGALRM timer for a block (a sweep's stall watchdog);
* :func:`stop_requests`: a child process's stop flag (the sampler, the UDP tool);
* :func:`ignore_signals`, :func:`interrupt_rc`: how a command ends once it is done.

Processes: only what we started is ever ended, by its PID, never by name.
:func:`stop_process` ends a :class:`subprocess.Popen` (SIGTERM, then SIGKILL);
:func:`wait_process` waits for one to end, told by the kernel (a pidfd), not by polling;
:func:`end_processes` ends recorded processes ({pid: start time}, the start time guarding
against PID reuse: :func:`proc_start_time`, :func:`same_process`) that a killed run left.
"""

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time

from bufferbloat.core.errors import EXIT_INTERRUPTED, EXIT_TERMINATED

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


# ------------------------------------------------------------------ this process's signals
def _main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handled(signals, handler):
    """Install ``handler`` for ``signals`` during the block, then put the old handlers
    back; yields {signal: old handler}."""
    old = {s: signal.signal(s, handler) for s in signals}
    try:
        yield old
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def terminate_on_sigterm():
    """Turn SIGTERM into KeyboardInterrupt (main thread only) so that ``finally`` blocks
    tear down and record."""
    if not _main_thread():
        return
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        def handler(_sig, _frame):
            raise KeyboardInterrupt("SIGTERM")
        signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def deferred_signals(note=None):
    """Hold SIGINT and SIGTERM during the block (a build or a teardown must not be cut in
    two); if one came, raise KeyboardInterrupt after it. A sweep's stall watchdog
    (SIGALRM with a Python handler, :func:`alarm`) is held too: an alarm during the block
    re-arms the timer (0.5 s), so it reaches its handler once the block is over. Outside
    the main thread, a no-op.
    """
    if not _main_thread():
        yield
        return
    got = []

    def handler(sig, _frame):
        if not got and note:
            print(note, file=sys.stderr, flush=True)
        got.append(sig)
    alarm_held = callable(signal.getsignal(signal.SIGALRM))
    rearm = (lambda _sig, _frame: signal.setitimer(signal.ITIMER_REAL, 0.5))  # noqa: E731
    with handled(INTERRUPTS, handler) as old, \
            handled((signal.SIGALRM,) if alarm_held else (), rearm):
        yield
    if got:
        if got[0] == signal.SIGTERM and old[signal.SIGTERM] in (signal.SIG_DFL, None):
            raise KeyboardInterrupt("SIGTERM")
        raise KeyboardInterrupt("SIGTERM" if got[0] == signal.SIGTERM else "SIGINT")


@contextlib.contextmanager
def alarm(limit_s, fire):
    """Call ``fire(signum, frame)`` (it usually raises) in the main thread once
    ``limit_s`` seconds have passed (SIGALRM); ``fire`` may re-arm the timer
    (``signal.setitimer``). Outside the main thread, or with no limit, a no-op."""
    if not limit_s or not _main_thread():
        yield
        return
    with handled((signal.SIGALRM,), fire):
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


def stop_requests(signals=(signal.SIGTERM,)):
    """A child process's stop flag: a list that gets the name of each of ``signals`` as
    it arrives (empty until then); the process checks it in its loop and ends cleanly."""
    got = []
    for s in signals:
        signal.signal(s, lambda sig, _frame: got.append(signal.Signals(sig).name))
    return got


def ignore_signals():
    """Ignore SIGINT and SIGTERM from here on (a process-wide disposition)."""
    for sig in INTERRUPTS:
        signal.signal(sig, signal.SIG_IGN)


def interrupt_within(exc):
    """The KeyboardInterrupt (a SIGINT, or a SIGTERM turned into one) that ``exc`` was
    raised from, or None. Python wraps some exceptions in its own: one raised by a
    descriptor's ``__set_name__`` while a class body runs becomes ``RuntimeError: Error
    calling __set_name__`` (3.11), with the interrupt as its cause. A SIGINT that lands
    while a module such as matplotlib is imported is such a case (2026-11-30's gate:
    a run recorded complete, then exit 1, "run failed", instead of 130)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def interrupt_rc(exc):
    """128 + the signal that interrupted a command (SIGTERM 143, SIGINT 130), from the
    KeyboardInterrupt it became."""
    return EXIT_TERMINATED if "SIGTERM" in str(exc) else EXIT_INTERRUPTED


def silence_closed_stream(stream):
    """Point the file descriptor of ``stream``, whose reader went away (a closed pipe or
    terminal), at /dev/null: the Python documentation's recipe for SIGPIPE, so that later
    writes, and the interpreter's own flush at exit, are silent instead of raising
    BrokenPipeError again. A stream without a descriptor is left as it is."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


def die_with_parent(sig=signal.SIGKILL):
    """In a child between fork and exec (``preexec_fn``): ``sig`` (SIGKILL) when the
    thread that started it dies, even by SIGKILL (prctl PR_SET_PDEATHSIG), so that a
    child such as qemu never outlives the command that owns it (SIGTERM lets a run
    child tear its network down first). Linux only; elsewhere a no-op."""
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)


# ------------------------------------------------------------------ processes we started
def proc_start_time(pid):
    """Start time of ``pid`` in clock ticks since boot (/proc/PID/stat field 22), or None
    if there is no such process."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[19])


def same_process(pid, start):
    """True if ``pid`` exists and is the process that started at ``start``."""
    got = proc_start_time(pid)
    return got is not None and (start is None or got == start)


def is_zombie(pid):
    """True if ``pid`` has ended but is not reaped yet (or is gone)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            data = f.read()
        return data[data.rindex(")") + 2] == "Z"
    except (OSError, ValueError):
        return True


def signal_pid(pid, sig, group=None):
    """Send ``sig`` to ``pid``'s process group when it leads one (our processes start
    their own session) or ``group`` says so, to the process alone when ``group`` is
    False; a process that is gone is no error."""
    try:
        if group or (group is None and os.getpgid(pid) == pid):
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_process(proc, timeout_s=None):
    """``proc.wait(timeout=timeout_s)`` (a :class:`subprocess.Popen` of ours), returning
    as soon as it ends: Popen's own wait polls with sleeps growing to 50 ms, and would
    add up to that to every wait (a run waits for several tools in a row). The kernel
    says when through a pidfd (Linux 5.3); where there is none, Popen's wait."""
    if proc.poll() is not None or timeout_s is None:
        return proc.wait(timeout=timeout_s)
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):     # no pidfd here, or already reaped
        return proc.wait(timeout=timeout_s)
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    return proc.wait(timeout=timeout_s)


def stop_process(proc, grace_s=3.0, group=True):
    """End a process we started (a :class:`subprocess.Popen`), by its PID: SIGTERM to its
    process group (``group``; ours start their own session) or to it alone, SIGKILL
    after ``grace_s``; returns its exit status."""
    if proc.poll() is not None:
        return proc.returncode
    signal_pid(proc.pid, signal.SIGTERM, group)
    try:
        return wait_process(proc, grace_s)
    except subprocess.TimeoutExpired:
        signal_pid(proc.pid, signal.SIGKILL, group)
        return wait_process(proc, grace_s)


def end_processes(procs, grace_s=2.0):
    """SIGTERM then SIGKILL every {pid: start} still running as recorded; returns the
    PIDs that were ended."""
    alive = {int(p): s for p, s in procs.items() if same_process(p, s)}
    for pid in alive:
        signal_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if all(not same_process(p, s) or is_zombie(p) for p, s in alive.items()):
            break
        time.sleep(0.05)
    for pid, start in alive.items():
        if same_process(pid, start) and not is_zombie(pid):
            signal_pid(pid, signal.SIGKILL)
    return sorted(alive)
