"""A bottleneck whose capacity changes over time: a mahimahi trace or a step schedule,
made into one rate per 10 ms window that the compiled loop (``bb-link-trace``) sets on
the bottleneck's HTB class in place (``tc class change`` semantics: the AQM leaf under
it, its queue, state and counters, are never touched).

* ``link_trace=FILE``: mahimahi's format, one line per 1500-byte delivery opportunity,
  the line an integer time in ms (non-decreasing); the trace wraps after its last line's
  time (its period). A window of 10 ms that holds ``n`` opportunities carries
  ``n x 1500`` bytes: ``n x 1.2`` Mbit/s.
* ``link_schedule=SECONDS:MBIT,...``: steps, each ``MBIT`` for ``SECONDS`` (a multiple
  of 10 ms), repeating after the last.

A window of zero capacity holds packets at the floor, :data:`FLOOR_MBIT` (1 kbit/s, the
lowest rate HTB is given here), as mahimahi holds them until the next opportunity.
Everything is validated before any network exists (:class:`ParameterError`, exit 2).
"""

import hashlib
import math
import os

from bufferbloat.core.errors import ParameterError

WINDOW_MS = 10
PACKET_BYTES = 1500
FLOOR_MBIT = 0.001
#: the highest rate a window may ask for (the bottleneck's own limit)
MAX_MBIT = 10_000.0
#: a trace file's limits: its size and its period
MAX_FILE_BYTES = 64 << 20
MAX_PERIOD_MS = 86_400_000
#: the most windows one period of the rate plan may hold (lcm of the period and 10 ms)
MAX_WINDOWS = 10_000_000


class LinkTrace:
    """One period of a capacity plan: ``window_bytes[i]``, what the link may carry in
    10 ms window ``i`` (wrapping), ``source`` (``trace`` or ``schedule``), ``text`` (the
    knob's value) and ``sha256`` (of the file's bytes or of the schedule's text)."""

    def __init__(self, window_bytes, source, text, sha256):
        self.window_bytes = [float(b) for b in window_bytes]
        self.source, self.text, self.sha256 = source, text, sha256

    @property
    def period_s(self):
        return len(self.window_bytes) * WINDOW_MS / 1000

    def rates_bps(self, factor=1.0):
        """The rate of every window, bit/s, scaled by ``factor`` (the run's rate
        scaling), never below the floor."""
        floor = int(FLOOR_MBIT * 1e6)
        per_s = 8 * 1000 / WINDOW_MS
        return [max(floor, int(round(b * per_s * factor))) for b in self.window_bytes]

    def capacity_bytes(self, n_windows, factor=1.0, start=0):
        """What windows ``start .. start+n_windows-1`` allow, bytes (the floor's few
        bytes count), wrapping."""
        rates = self.rates_bps(factor)
        n = len(rates)
        return [rates[(start + i) % n] * WINDOW_MS / 1000 / 8 for i in range(n_windows)]

    def summary(self, factor=1.0):
        """What ``describe`` and the record show."""
        rates = [r / 1e6 for r in self.rates_bps(factor)]
        return {"source": self.source, "sha256": self.sha256,
                "period_s": round(self.period_s, 3), "windows": len(rates),
                "mean_mbit": round(sum(rates) / len(rates), 4),
                "min_mbit": round(min(rates), 4), "max_mbit": round(max(rates), 4),
                "zero_windows": sum(1 for b in self.window_bytes if b == 0),
                "scale": factor}

    def write_rates(self, path, factor=1.0):
        """The loop's input: one rate per window, bit/s, one a line."""
        with open(path, "w") as f:
            f.write("".join(f"{r}\n" for r in self.rates_bps(factor)))
        return path


def parse_mahimahi(text, name="link_trace"):
    """The opportunity times (ms) of a mahimahi trace, validated."""
    times = []
    last = 0
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if not s.isdigit():
            raise ParameterError(name, f"line {i}: {s[:40]!r}",
                                 "one non-negative integer (ms) per line")
        t = int(s)
        if t < last:
            raise ParameterError(name, f"line {i}: {t} after {last}",
                                 "non-decreasing times (ms)")
        last = t
        times.append(t)
    if not times or times[-1] <= 0:
        raise ParameterError(name, "an empty trace" if not times else "a period of 0 ms",
                             "at least one line and a last time above 0 ms")
    if times[-1] > MAX_PERIOD_MS:
        raise ParameterError(name, f"a period of {times[-1]} ms",
                             f"a period of at most {MAX_PERIOD_MS} ms (24 h)")
    return times


def windows_of_times(times, name="link_trace"):
    """Bytes per 10 ms window over one period of the plan: lcm(period, 10 ms) (a trace
    whose period is not a multiple of 10 ms is repeated until it is)."""
    period = times[-1]
    span = math.lcm(period, WINDOW_MS)
    n = span // WINDOW_MS
    if n > MAX_WINDOWS:
        raise ParameterError(name, f"a period of {period} ms",
                             f"one whose lcm with 10 ms is at most {MAX_WINDOWS} windows")
    per_ms = [0] * period
    for t in times:
        per_ms[t % period] += 1
    out = [0] * n
    for rep in range(span // period):
        base = rep * period
        for ms, c in enumerate(per_ms):
            if c:
                out[(base + ms) // WINDOW_MS] += c * PACKET_BYTES
    peak = max(out) * 8 * 1000 / WINDOW_MS / 1e6
    if peak > MAX_MBIT:
        raise ParameterError(name, f"a 10 ms window of {peak:g} Mbit/s",
                             f"at most {MAX_MBIT:g} Mbit/s in every window")
    return out


def load_trace(path, name="link_trace"):
    """The :class:`LinkTrace` of a mahimahi file."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ParameterError(name, path, f"a file of at most {MAX_FILE_BYTES >> 20} MiB "
                                 f"(this one: {size} bytes)")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ParameterError(name, path, f"a readable mahimahi trace file ({exc.strerror})") \
            from None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ParameterError(name, path, "a text file of integers (ms), one a line") from None
    times = parse_mahimahi(text, name)
    return LinkTrace(windows_of_times(times, name), "trace", path,
                     hashlib.sha256(data).hexdigest())


def parse_schedule(text, name="link_schedule"):
    """``[(seconds, mbit), ...]`` of ``SECONDS:MBIT,...``, validated."""
    steps = []
    for item in str(text).split(","):
        parts = item.strip().split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            secs, mbit = float(parts[0]), float(parts[1])
        except ValueError:
            raise ParameterError(name, text, "steps SECONDS:MBIT separated by commas, "
                                 "e.g. 2:8,2:2") from None
        if not (math.isfinite(secs) and 0 < secs <= MAX_PERIOD_MS / 1000):
            raise ParameterError(name, item, "a step of more than 0 s and at most 86400 s")
        if abs(secs * 1000 / WINDOW_MS - round(secs * 1000 / WINDOW_MS)) > 1e-6:
            raise ParameterError(name, item, "a step lasting a multiple of 10 ms")
        if not (math.isfinite(mbit) and (mbit == 0 or FLOOR_MBIT <= mbit <= MAX_MBIT)):
            raise ParameterError(name, item, f"a rate of 0 (held at {FLOOR_MBIT:g} Mbit/s) "
                                 f"or {FLOOR_MBIT:g} to {MAX_MBIT:g} Mbit/s")
        steps.append((secs, mbit))
    total = sum(s for s, _ in steps)
    if total > MAX_PERIOD_MS / 1000:
        raise ParameterError(name, text, "steps lasting at most 86400 s together")
    return steps


def schedule_trace(text, name="link_schedule"):
    """The :class:`LinkTrace` of a step schedule (its windows' bytes may be fractional:
    kept exact as a rate, rounded to whole bytes in ``window_bytes``)."""
    steps = parse_schedule(text, name)
    out = []
    for secs, mbit in steps:
        out += [mbit * 1e6 / 8 * WINDOW_MS / 1000] * int(round(secs * 1000 / WINDOW_MS))
    return LinkTrace(out, "schedule", str(text),
                     hashlib.sha256(str(text).encode()).hexdigest())


def from_params(params):
    """The :class:`LinkTrace` a topology's ``link_trace``/``link_schedule`` ask for, or
    None; both at once is an error."""
    trace, sched = params.get("link_trace"), params.get("link_schedule")
    if trace and sched:
        raise ParameterError("link_schedule", sched, "unset when link_trace is set")
    if trace:
        return load_trace(trace)
    if sched:
        return schedule_trace(sched)
    return None
