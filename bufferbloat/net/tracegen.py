"""Capacity traces made here, in mahimahi's format (:mod:`.linktrace` reads them):
constant, steps, a square wave and a seeded random walk, and a converter from a
``t,Mbit/s`` CSV. A profile is a list of ``(seconds, mbit)`` steps; :func:`opportunities`
makes it into 1500-byte delivery opportunities, one line per opportunity, in ms.

Every generator is deterministic: the random walk draws from ``random.Random(seed)``
(a log-rate Ornstein-Uhlenbeck walk around the mean, a Poisson-like rate process as
Pantheon's calibrated emulators used), so one seed is one trace on every machine.
"""

import csv
import math
import random

from bufferbloat.core.errors import UsageError
from bufferbloat.net.linktrace import MAX_MBIT, PACKET_BYTES


def constant(seconds, mbit):
    return [(float(seconds), float(mbit))]


def square(seconds, low_mbit, high_mbit, half_period_s):
    """``low`` then ``high``, each ``half_period_s``, for ``seconds``."""
    out, t, i = [], 0.0, 0
    while t < seconds - 1e-9:
        d = min(half_period_s, seconds - t)
        out.append((d, low_mbit if i % 2 == 0 else high_mbit))
        t, i = t + d, i + 1
    return out


def random_walk(seconds, mean_mbit, seed=1, step_s=0.1, sigma=0.25, pull=0.1,
                low_mbit=0.0, high_mbit=None):
    """A seeded walk of the log rate around ``log(mean_mbit)``: every ``step_s`` it moves
    ``pull`` of the way back to the mean plus a normal step of ``sigma``; clamped to
    ``low_mbit..high_mbit`` (default 4 x the mean)."""
    rng = random.Random(seed)
    high = 4 * mean_mbit if high_mbit is None else high_mbit
    # the walk's stationary variance of the log rate; its mean set so that the rate's
    # (log-normal) mean is mean_mbit
    var = sigma ** 2 / (1 - (1 - pull) ** 2) if 0 < pull < 2 else 0.0
    mu = math.log(mean_mbit) - var / 2
    x = mu
    out = []
    for _ in range(int(round(seconds / step_s))):
        x += pull * (mu - x) + sigma * rng.gauss(0.0, 1.0)
        out.append((step_s, min(high, max(low_mbit, math.exp(x)))))
    return out


def check_profile(steps):
    if not steps:
        raise UsageError("a trace of no steps")
    for secs, mbit in steps:
        if not (secs > 0 and 0 <= mbit <= MAX_MBIT):
            raise UsageError(f"a step of {secs!r} s at {mbit!r} Mbit/s (allowed: more "
                             f"than 0 s, 0 to {MAX_MBIT:g} Mbit/s)")
    return steps


def opportunities(steps):
    """The opportunity times (ms, 1..P) of a profile; P (its total length in ms) is the
    last, added when the rate there is 0 (mahimahi's period is its last line)."""
    check_profile(steps)
    out, acc, t_ms = [], 0.0, 0
    for secs, mbit in steps:
        per_ms = mbit * 1e6 / 8 / 1000
        for _ in range(int(round(secs * 1000))):
            t_ms += 1
            acc += per_ms
            while acc >= PACKET_BYTES - 1e-9:
                out.append(t_ms)
                acc -= PACKET_BYTES
    if not out or out[-1] != t_ms:
        out.append(t_ms)
    return out


def mahimahi_text(steps):
    return "".join(f"{t}\n" for t in opportunities(steps))


def read_rate_csv(path):
    """Steps of a ``t,Mbit/s`` CSV (a header line allowed): each row's rate holds from
    its time to the next row's; the last row's time ends the trace."""
    rows = []
    with open(path, newline="") as f:
        for i, r in enumerate(csv.reader(f), 1):
            if not r or r[0].strip().startswith("#"):
                continue
            try:
                rows.append((float(r[0]), float(r[1])))
            except (ValueError, IndexError):
                if i == 1:
                    continue       # a header
                raise UsageError(f"{path} line {i}: {','.join(r)!r} (allowed: "
                                 "t_seconds,mbit)") from None
    if len(rows) < 2 or rows[0][0] != 0:
        raise UsageError(f"{path}: at least two rows, the first at t=0")
    steps = []
    for (t, mbit), (t2, _) in zip(rows, rows[1:]):
        if t2 <= t:
            raise UsageError(f"{path}: times must increase ({t2:g} after {t:g})")
        steps.append((t2 - t, mbit))
    return check_profile(steps)
