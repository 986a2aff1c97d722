"""Typed, ranged parameters: the single place where user values are checked.

Every tunable of a qdisc, link, topology, scenario or traffic kind is declared once as a
:class:`Param` (name with its unit, type, range, default, documentation). Values arriving
from Python code or from the command line (strings) are coerced and checked here, and a
bad one raises :class:`~bufferbloat.core.errors.ParameterError` naming the parameter, the
value and what is allowed. Unknown keys are rejected with the list of the valid ones,
never swallowed. The arguments of a tool object (:func:`check_number`,
:func:`check_port`) and the environment's numbers (:func:`env_number`) are checked here
too. Standard library only (the UDP tool's processes and the VM's host side use it).
"""

import math
import os
import re
from dataclasses import dataclass

from bufferbloat.core.errors import ParameterError, UsageError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Names that may reach a command line as an argument (interface, host, CCA names):
# letters, digits, '_', '-', '.', at most 15 characters (IFNAMSIZ - 1).
SAFE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is int, float, bool or str; ``lo``/``hi`` bound numbers
    (``lo_open`` makes the lower bound exclusive); ``choices`` bounds strings."""

    name: str
    kind: type
    default: object
    doc: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: tuple | None = None
    pattern: str | None = None  # regex for str values; default SAFE_NAME

    def allowed(self):
        """Human description of the allowed values."""
        if self.kind is bool:
            return "true or false"
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind is str:
            return (f"text matching {self.pattern}" if self.pattern
                    else "a name of letters, digits, '_', '-', '.'")
        lo = "" if self.lo is None else f"{'>' if self.lo_open else '>='} {self.lo:g}"
        hi = "" if self.hi is None else f"<= {self.hi:g}"
        what = "an integer" if self.kind is int else "a number"
        return " and ".join(x for x in (f"{what} {lo}".strip(), hi) if x)

    def coerce(self, value):
        """Return ``value`` converted to this parameter's type, or raise ParameterError."""
        if value is None and self.default is None:
            return None
        bad = ParameterError(self.name, value, self.allowed())
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            raise bad
        if self.kind in (int, float):
            if isinstance(value, bool):
                raise bad
            try:
                num = float(value) if isinstance(value, str) else value
                if not isinstance(num, (int, float)) or not math.isfinite(num):
                    raise ValueError
                if self.kind is int:
                    if float(num) != int(num):
                        raise ValueError
                    num = int(num)
                else:
                    num = float(num)
            except (TypeError, ValueError):
                raise bad from None
            if self.lo is not None and (num < self.lo or (self.lo_open and num == self.lo)):
                raise bad
            if self.hi is not None and num > self.hi:
                raise bad
            return num
        if not isinstance(value, str):
            raise bad
        if self.choices:
            if value not in self.choices:
                raise bad
        elif not (re.fullmatch(self.pattern, value) if self.pattern
                  else SAFE_NAME.match(value)):
            raise bad
        return value


def format_param(value, none="-"):
    """A parameter's value as the user writes it: ``none`` for None, true/false, a float
    without trailing zeros (describe's tables, a sweep's configuration labels)."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def check_params(owner, params, values):
    """Validate a mapping of user values against a list of :class:`Param`.

    Returns a dict with every declared parameter (defaults filled in). Unknown keys raise a
    UsageError listing the valid ones for ``owner`` (e.g. "qdisc pie").
    """
    table = {p.name: p for p in params}
    unknown = sorted(set(values) - set(table))
    if unknown:
        valid = ", ".join(sorted(table)) or "none"
        raise UsageError(f"unknown parameter(s) for {owner}: {', '.join(unknown)} "
                         f"(valid: {valid})")
    out = {}
    for p in params:
        out[p.name] = p.coerce(values[p.name]) if p.name in values else p.default
    return out


def check_number(name, value, lo, hi, conv=float, lo_open=False):
    """``conv(value)`` if within lo..hi (lo excluded when ``lo_open``), else
    ParameterError: the arguments of a tool object (a flow, a probe, a stream)."""
    try:
        v = conv(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, f"a number in {lo}..{hi}") from None
    if (isinstance(v, float) and math.isnan(v)) or v > hi or v < lo or (lo_open and v == lo):
        raise ParameterError(name, value, f"{'>' if lo_open else '>='} {lo} and <= {hi}")
    return v


def check_port(port, name="port"):
    """A TCP/UDP port 1..65535."""
    return check_number(name, port, 1, 65535, int)


def env_number(name, default, lo, hi, what, conv=float, environ=None, error=UsageError):
    """Environment variable ``name`` as a number (``conv``: float, or int for digits
    only) in lo..hi, or ``default`` when it is unset or empty; ``error`` (UsageError:
    exit 2) naming it, its value and ``what`` is allowed otherwise."""
    raw = (os.environ if environ is None else environ).get(name)
    text = (raw or "").strip()
    if not text:
        return default
    try:
        if conv is int and not text.isdigit():
            raise ValueError(text)
        value = conv(text)
    except ValueError:
        value = None
    if value is None or value != value or not lo <= value <= hi:
        raise error(f"invalid value for {name}: {raw!r} (allowed: {what})")
    return value


#: The limits of a run's own numbers, checked where they enter (the CLI, ``run_point``,
#: a sweep): the traffic's duration (s), the repetitions, the sampler's period (s).
DURATION_LIMITS_S = (1, 86400)
REPEAT_LIMITS = (1, 1000)
SAMPLE_PERIOD_LIMITS_S = (0.001, 10)

#: The lowest rate any rate parameter takes (links, sending rates), Mbit/s: 1 kbit/s.
#: tc hands HTB a rate in whole bytes per second (iproute2's get_rate divides the bit/s
#: by 8 and truncates): below 8 bit/s it is 0 and tc refuses the class ("rate" is
#: required), and a rate that is not a multiple of 8 bit/s is cut down (9bit -> 8bit,
#: 100bit -> 96bit). HTB keeps its burst as the time to send it at the rate, in 32-bit
#: scheduler ticks: below ~800 bit/s that time overflows and the burst shrinks under one
#: packet (measured with tc 6.1, kernel 6.18: 1599 B at 96 bit/s, 225 B at 8 bit/s).
#: 1 kbit/s = 125 B/s is the first round rate that tc expresses exactly and whose burst
#: holds a full-size packet; iperf3 (-b, in Mbit/s) and NetPerfMeter (frames/s printed
#: with 6 digits) also turn a rate near 0 into "unlimited", which the floor rules out.
MIN_RATE_MBIT = 0.001


def check_range(what, value, lo, hi, unit=""):
    """``value`` if it is a number (not a bool, not NaN) within lo..hi, else UsageError
    ``invalid value for WHAT: VALUE (allowed: LO to HI UNIT)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not lo <= value <= hi:
        shown = f"{value:g}" if isinstance(value, (int, float)) \
            and not isinstance(value, bool) else repr(value)
        raise UsageError(f"invalid value for {what}: {shown} (allowed: {lo:g} to {hi:g}"
                         f"{unit})")
    return value


def _git_dir_of(path):
    """The git directory ``path`` lies in (a ``.git`` directory on its way, or a bare
    repository's: a directory holding HEAD, objects/ and refs/), or None."""
    parts = path.split(os.sep)
    if ".git" in parts:
        return os.sep.join(parts[:parts.index(".git") + 1]) or os.sep
    probe = path
    while True:
        if os.path.isfile(os.path.join(probe, "HEAD")) and all(
                os.path.isdir(os.path.join(probe, d)) for d in ("objects", "refs")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def check_out_dir(path, what="--out"):
    """An output directory must be a plain path to a directory we can create or write,
    outside the kernel's pseudo file systems and outside any git repository's own
    directory (``.git``: results there would corrupt it or be lost to git's own
    housekeeping). Raises ParameterError (exit 2)."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not text or not text.strip() or any(c in text for c in "\0\n\r"):
        raise ParameterError(what, path, "a directory path")
    full = os.path.realpath(text)
    if any(full == p or full.startswith(p + "/") for p in ("/proc", "/sys", "/dev")):
        raise ParameterError(what, path, "a directory outside /proc, /sys and /dev")
    git_dir = _git_dir_of(os.path.abspath(text)) or _git_dir_of(full)
    if git_dir:
        raise ParameterError(what, path, f"a directory outside a git repository's own "
                             f"directory ({git_dir})")
    probe_dir = full
    while not os.path.exists(probe_dir):
        probe_dir = os.path.dirname(probe_dir)
    if not os.path.isdir(probe_dir):
        raise ParameterError(what, path, f"a directory path ({probe_dir} is not a directory)")
    if not os.access(probe_dir, os.W_OK | os.X_OK):
        raise ParameterError(what, path, f"a writable directory ({probe_dir} is not "
                             "writable)")
    return text
