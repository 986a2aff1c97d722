"""Every traffic kind, and the lookups of the registry (:data:`.base.KINDS`): importing
this module imports each kind's module, which registers it. Whoever looks a kind up
imports from here; a tool process started in a namespace imports only its own module
(the package itself imports nothing)."""

from bufferbloat.core.errors import UsageError
from bufferbloat.traffic import iperf, irtt, netperfmeter, ping, rrul, udpstream, web  # noqa: F401  (they register)
from bufferbloat.traffic.base import KINDS


def part_class(kind):
    """The class registered under ``kind`` (UsageError naming the known kinds)."""
    try:
        return KINDS[kind]
    except KeyError:
        raise UsageError(f"unknown traffic kind {kind!r} (known: "
                         f"{', '.join(sorted(KINDS))})") from None


def needs_of(specs):
    """The capabilities the kinds of resolved traffic ``specs`` need (sorted)."""
    return sorted({n for spec in specs for n in part_class(spec["kind"]).needs})


def build(spec, ctx):
    """The part of a resolved traffic ``spec`` in the run context ``ctx``."""
    return part_class(spec["kind"])(spec, ctx)
