"""``bufferbloat describe``: everything about one scenario (bufferbloat/describe.py)."""

from bufferbloat import describe
from bufferbloat.commands.common import parse_overrides, scenario


def cmd_describe(args):
    """Print everything about a scenario: study, topology, traffic, keys, sweep, figures,
    expected result, headline metrics."""
    print("\n".join(describe.describe(scenario(args.scenario),
                                        parse_overrides(getattr(args, "set", None)))))
    return 0
