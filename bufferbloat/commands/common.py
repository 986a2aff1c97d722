"""What the commands share: scenario names and ``--set`` overrides checked (exit 2 on a
bad one), the options every running command validates before anything is built, a
rate-limited progress line, and the exit status of a command that ran several points."""

import contextlib
import functools
import re
import sys
import time

from bufferbloat.core.errors import EXIT_DEGRADED, UsageError


def scenarios():
    from bufferbloat.scenarios import catalogue
    return catalogue()


def scenario(name):
    cat = scenarios()
    if name not in cat:
        raise UsageError(f"unknown scenario {name!r} (valid: {', '.join(cat)})")
    return cat[name]


def parse_overrides(pairs):
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"invalid --set {pair!r} (expected key=value)")
        out[key.strip()] = value.strip()
    return out


@contextlib.contextmanager
def point_runner(executor):
    """The runner of a sweep's points (``runner(run, run_dir=, log=)``), closed at the
    end: with an executor, the engine's (each worker builds its own networks), closing
    the executor; here, one point after the other, the engine's with a
    :class:`~bufferbloat.net.reuse.NetworkKeeper` (a point's network serves the next
    when it can; the last one kept is removed at the end, or on an interrupt)."""
    from bufferbloat.run.engine import run_resolved
    if executor is not None:
        try:
            yield run_resolved
        finally:
            executor.close()
        return
    from bufferbloat.net.reuse import NetworkKeeper
    with NetworkKeeper() as keeper:
        yield functools.partial(run_resolved, keeper=keeper)


def check_common(args):
    """Options every running command shares, checked before anything is built."""
    from bufferbloat.core.params import (
        DURATION_LIMITS_S,
        REPEAT_LIMITS,
        check_out_dir,
        check_range,
    )
    check_out_dir(args.out)
    if getattr(args, "time", None) is not None:
        check_range("--time", args.time, *DURATION_LIMITS_S, " s")
    if getattr(args, "repeat", None) is not None:
        check_range("--repeat", args.repeat, *REPEAT_LIMITS)
    if hasattr(args, "retry_degraded"):
        retries_of(args)


def precision_rule(args, *scenarios, refuse_derived=True):
    """The ``--precision`` rule (bufferbloat/run/precision.py), or None without
    --precision; checked before anything is built (UsageError, exit 2): its ranges, not
    with --repeat, and (``refuse_derived``) not for a scenario whose knobs come from
    another run."""
    from bufferbloat.run.precision import PrecisionRule
    given = {k: getattr(args, k, None) for k in ("confidence", "min_reps", "max_reps")}
    if getattr(args, "precision", None) is None:
        extra = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
        if extra:
            raise UsageError(f"{', '.join(extra)} only go with --precision P")
        return None
    if getattr(args, "repeat", None) is not None:
        raise UsageError("--precision decides the number of repetitions: it cannot be "
                         "combined with --repeat (use --min-reps/--max-reps)")
    derived = sorted(s.name for s in scenarios if getattr(s, "derived", None))
    if derived and refuse_derived:
        raise UsageError(f"--precision is not available for {', '.join(derived)}: its "
                         "stream points are paced from the bulk run of the same "
                         "repetition, which the rule does not add in step (use --repeat)")
    defaults = PrecisionRule(args.precision)
    return PrecisionRule(args.precision, **{k: v if v is not None else getattr(defaults, k)
                                            for k, v in given.items()}).check()


def retries_of(args):
    """The number of reruns of a degraded run (validated: UsageError, exit 2)."""
    from bufferbloat.core.params import check_range
    from bufferbloat.run.watch import RETRY_DEGRADED_LIMITS, retry_degraded_default
    n = getattr(args, "retry_degraded", None)
    if n is None:
        return retry_degraded_default()
    return int(check_range("--retry-degraded", n, *RETRY_DEGRADED_LIMITS))


_PROGRESS = {"t": 0.0}


def progress(text):
    """A progress line on stderr ("figures of 12/40 runs"): at most one a second, and
    the last one ("N/N") always."""
    now = time.monotonic()
    done = re.search(r"(\d+)/(\d+)", text)
    if now - _PROGRESS["t"] >= 1.0 or (done and done.group(1) == done.group(2)):
        _PROGRESS["t"] = now
        print(text, file=sys.stderr, flush=True)


def report_faulty(entries):
    """Print the runs whose health is faulty (a part began before its due time: the
    run's own fault, which no rerun clears); returns how many (they count as failed)."""
    if entries:
        print(f"faulty ({len(entries)}): a part started before its due time; kept, "
              "marked, left out of means and figures:\n  "
              + "\n  ".join(e["run_dir"] for e in entries), file=sys.stderr)
    return len(entries)


def end_status(failed, degraded_dirs):
    """Exit status of a command that ran several points: 1 if any failed, else
    EXIT_DEGRADED (listing them) if any is degraded, else 0."""
    if degraded_dirs:
        print(f"degraded ({len(degraded_dirs)}): the emulator fell behind; kept, marked, "
              "left out of means and figures:\n  " + "\n  ".join(degraded_dirs),
              file=sys.stderr)
    if failed:
        return 1
    return EXIT_DEGRADED if degraded_dirs else 0
