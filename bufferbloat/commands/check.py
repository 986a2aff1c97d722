"""``bufferbloat check``: what this machine can emulate, and whether it can run given
scenarios (exit 2 when it cannot)."""

import json

from bufferbloat.commands.common import scenario, scenarios
from bufferbloat.commands.placement import needs
from bufferbloat.core.errors import EXIT_USAGE
from bufferbloat.net import capabilities
from bufferbloat.run.resolved import resolve_run


def cmd_check(args):
    """Print what this machine can emulate; with --scenario, exit 2 if it can't run it."""
    names = list(scenarios()) if args.scenario == ["all"] else (args.scenario or [])
    for name in names:
        scenario(name)           # an unknown name: exit 2 before any output
    caps = capabilities.probe()
    if args.json:
        print(json.dumps(caps.to_dict(), indent=1))
    elif not args.quiet:
        print(caps.table())
    blocked = []
    for name in names:           # each at its default setting, as `run NAME` would be
        missing = [f for f in needs([resolve_run(scenario(name))])[1]
                   if not caps.has(f)]
        if missing:
            blocked.append(f"{name}: needs {', '.join(missing)}")
    if blocked:
        if not args.quiet:
            print("\nscenarios this machine cannot run:\n  " + "\n  ".join(blocked))
        return EXIT_USAGE
    return 0
