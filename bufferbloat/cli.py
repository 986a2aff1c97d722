"""The bufferbloat command: check, list, describe, run, sweep, show, plot, report, cost,
compare, export, run-all and worker (:func:`parser`, built from the table of commands in
bufferbloat/commands/table.py, whose texts are the help; each command's handler is in
bufferbloat/commands/ and is imported only when that command runs).

Usage errors (bad parameter, unknown scenario, missing kernel feature or tool) print one
message and exit with code 2 before any network state is created
(bufferbloat/commands/errors.py).
"""

import argparse
import sys
import textwrap

from bufferbloat.commands.errors import DropClosedPipe, exit_code
from bufferbloat.commands.table import COMMANDS, DESCRIPTION, EPILOG, VERSION_HELP, OneOf, load
from bufferbloat.core.signals import ignore_signals, interrupt_rc


def main(argv=None):
    """Entry point of the ``bufferbloat`` console command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.argv = argv          # what a command moving into the VM runs there again
    return exit_code(args.cmd, lambda: load(args.handler)(args))


def parser():
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="bufferbloat", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version, nargs=0, help=VERSION_HELP)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                           title="commands")
    for command in COMMANDS:
        sp = sub.add_parser(
            command.name, help=command.summary,
            description=textwrap.fill(command.description, 88),
            epilog="examples:\n" + "\n".join(f"  {line}" for line in command.examples),
            formatter_class=argparse.RawDescriptionHelpFormatter)
        for argument in command.arguments:
            if isinstance(argument, OneOf):
                group = sp.add_mutually_exclusive_group()
                for a in argument.args:
                    group.add_argument(*a.flags, **a.options)
                sp.set_defaults(**argument.defaults)
            else:
                sp.add_argument(*argument.flags, **argument.options)
        sp.set_defaults(handler=command.handler)
    return p


class _Version(argparse.Action):
    """``--version``: the version and where the code comes from (asked only then: it
    may run git)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from bufferbloat import __version__
        from bufferbloat.core.paths import code_identity
        print(f"bufferbloat {__version__} ({code_identity()})")
        parser.exit()


def console():
    """The ``bufferbloat`` program: :func:`main`, then exit quietly. Once ``main`` has
    returned, everything is recorded and torn down, so a SIGINT/SIGTERM has nothing left
    to stop; but Python puts the default handlers back while the interpreter finalises,
    and a signal in that window would kill the process (rc -2/-15) after a run recorded
    as complete. So the program ignores them from here on: a process-wide disposition
    (a thread mask would not do: the kernel hands a signal to any thread that does not
    block it, and the traffic tools' watcher threads may still exist)."""
    sys.stdout, sys.stderr = DropClosedPipe(sys.stdout), DropClosedPipe(sys.stderr)
    try:
        rc = main()
        sys.stdout.flush()
        ignore_signals()
    except KeyboardInterrupt as exc:      # one that came between main and the above
        ignore_signals()
        rc = interrupt_rc(exc)
    return rc
