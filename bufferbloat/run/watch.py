"""A point under watch: its stall watchdog and its reruns while it comes out degraded.

Watchdog: a point that runs longer than its own duration plus a margin
(:func:`stall_limit_s`: duration + the flows' grace period + an allowance for setup and
teardown, plus 50 %) is ended (SIGALRM raises :class:`PointStalled` in the run, which
tears its network down and records it ``failed`` with the reason) and reported
``stalled``; the sweep goes on with the next point, as for a failed one.

A run that comes out degraded (the emulator fell behind: docs/design/health.md) is kept, set
aside and run again (:func:`run_until_healthy`). :func:`run_one` runs one point so, for
``run`` and ``sweep`` alike, and returns its :class:`Outcome`.
"""

import contextlib
import signal

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import env_number
from bufferbloat.core.signals import alarm
from bufferbloat.results.health import headline, verdict_of
from bufferbloat.run.plan import read_record

#: Seconds a point may take beyond its traffic and the flows' grace period (network
#: build, teardown, metrics; ~20 s at most measured in the TCG VM); env overrides.
STALL_ALLOWANCE_S = 60.0
STALL_ALLOWANCE_ENV = "BUFFERBLOAT_STALL_ALLOWANCE_S"
#: Env: a fixed stall limit in seconds instead of the formula (tests, odd machines).
STALL_LIMIT_ENV = "BUFFERBLOAT_STALL_LIMIT_S"
#: ... plus this share of the whole, for a slow machine.
STALL_MARGIN = 0.5
#: A stall swallowed by a broad ``except`` in the run is raised again this much later.
STALL_REFIRE_S = 10.0


#: A run that comes out degraded (the emulator fell behind: docs/design/health.md) is kept,
#: marked, set aside, and run again up to this many times (``--retry-degraded``, env
#: BUFFERBLOAT_RETRY_DEGRADED). Measured: a 15 s B run launching 8 flows in the TCG VM
#: started its last flow 0.6-1.2 s late on most runs and 2.3 s late on one in a CI run;
#: the rerun of such a point is usually healthy. Only the last attempt counts as the
#: point's result; the earlier ones stay on disk, degraded, left out of means.
RETRY_DEGRADED = 1
RETRY_DEGRADED_ENV = "BUFFERBLOAT_RETRY_DEGRADED"
RETRY_DEGRADED_LIMITS = (0, 10)


def retry_degraded_default():
    """The default number of reruns of a degraded run (env, else RETRY_DEGRADED)."""
    return env_number(RETRY_DEGRADED_ENV, RETRY_DEGRADED, *RETRY_DEGRADED_LIMITS,
                      "reruns of a degraded run", conv=int)


def run_until_healthy(run_once, retries, log=print, set_aside=None):
    """Call ``run_once()`` (returns a run directory) until its run is not degraded, at
    most 1 + ``retries`` times. Returns (run_dir, [the degraded attempts' directories]).
    ``set_aside(run_dir)`` -> new directory: moves a degraded attempt out of the way
    first (a sweep's point directory is fixed); without it each attempt keeps its own."""
    aside = []
    for attempt in range(retries + 1):
        run_dir = run_once()
        rec = read_record(run_dir)
        if attempt == retries or verdict_of(rec) != "degraded":
            return run_dir, aside
        kept = set_aside(run_dir) if set_aside else run_dir
        aside.append(kept)
        log(f"  DEGRADED, kept as {kept} ({headline(rec.get('health'))}); running it "
            f"again ({attempt + 1}/{retries})")
    raise AssertionError("unreachable")


class PointStalled(RuntimeError):
    """A point ran past its stall limit (raised in the run by the watchdog)."""


def stall_limit_s(config, allowance_s=None, margin=STALL_MARGIN):
    """Seconds after which a point of ``config`` counts as stalled: (duration + the
    flows' grace period + ``allowance_s``) x (1 + ``margin``). ``allowance_s`` defaults
    to env BUFFERBLOAT_STALL_ALLOWANCE_S, else STALL_ALLOWANCE_S; env
    BUFFERBLOAT_STALL_LIMIT_S replaces the whole formula."""
    from bufferbloat.run.engine import FLOW_GRACE_S  # noqa: PLC0415 - not the engine's imports for a limit
    fixed = _env_seconds(STALL_LIMIT_ENV, None)
    if fixed:
        return fixed
    if allowance_s is None:
        allowance_s = _env_seconds(STALL_ALLOWANCE_ENV, STALL_ALLOWANCE_S)
    return (float(config["duration_s"]) + FLOW_GRACE_S + allowance_s) * (1.0 + margin)


def _env_seconds(name, default):
    """Env ``name`` as seconds (0 to 86400), or ``default`` when unset or empty."""
    return env_number(name, default, 0, 86400, "seconds, 0 to 86400")


@contextlib.contextmanager
def watchdog(limit_s, what="the point"):
    """Raise :class:`PointStalled` in the main thread once ``limit_s`` seconds have
    passed (SIGALRM), and every STALL_REFIRE_S after that until the block ends (a broad
    ``except`` in the run may swallow one). Builds and teardowns hold it like SIGINT
    (:func:`bufferbloat.core.signals.deferred_signals`). Outside the main thread, or with no
    limit, a no-op."""
    def fire(_sig, _frame):
        signal.setitimer(signal.ITIMER_REAL, STALL_REFIRE_S)
        raise PointStalled(f"{what} still running after {limit_s:.4g} s (its stall "
                           "limit): ended")
    with alarm(limit_s, fire):
        yield


class Outcome:
    """How one point ended (:func:`run_one`): ``status`` ok, stalled or failed; its run
    directory and health verdict when ok; the exception otherwise (``plain``: its text is
    the whole message, no exception type in front). On a cluster, the ``worker``, its
    ``machine`` and ``where`` it ran (host or VM)."""

    def __init__(self, status, run_dir=None, health=None, exc=None, plain=False):
        self.status, self.run_dir, self.health, self.exc = status, run_dir, health, exc
        self.plain = plain
        self.worker = self.machine = self.where = None
        #: on a cluster: {sent_bytes, warning?} of the run's way back
        self.sent = None


def run_one(run, label, limit, retries, log=print, set_aside=None):
    """One point, for ``run`` and ``sweep`` alike: ``run()`` (returns its run directory)
    under a stall watchdog of ``limit`` s (None: none), again while it comes out
    degraded, up to ``retries`` times (:func:`run_until_healthy`). A stalled or failed
    point is returned, not raised: the others go on; UsageError and KeyboardInterrupt
    are raised. Returns an :class:`Outcome`."""
    def once():
        with watchdog(limit, label):
            return run()
    try:
        run_dir, _ = run_until_healthy(once, retries, log=log, set_aside=set_aside)
    except (UsageError, KeyboardInterrupt):
        raise
    except PointStalled as exc:
        return Outcome("stalled", exc=exc)
    except Exception as exc:  # noqa: BLE001 - one failed point must not stop the rest
        return Outcome("failed", exc=exc)
    return Outcome("ok", run_dir, verdict_of(read_record(run_dir)))
