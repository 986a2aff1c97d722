"""Typed, ranged parameters: the single place where user values are checked.

Every tunable of a qdisc, link or topology is declared once as a :class:`Param` (name with
its unit, type, range, default, documentation). Values arriving from Python code or from
the command line (strings) are coerced and checked here, and a bad one raises
:class:`~bufferbloat.errors.ParameterError` naming the parameter, the value and what is
allowed. Unknown keys are rejected with the list of the valid ones, never swallowed.
"""

import math
import re
from dataclasses import dataclass

from .errors import ParameterError, UsageError

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


def check_name(what, value):
    """Check a name that will be passed to a tool as an argument."""
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        raise ParameterError(what, value, "letters, digits, '_', '-', '.', at most 15 "
                             "characters, starting with a letter")
    return value
