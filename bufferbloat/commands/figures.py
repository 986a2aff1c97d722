"""``bufferbloat plot``, ``report`` and ``cost``: figures, one HTML page and a cost table
made from stored results (bufferbloat/plots/commands.py); nothing is rerun."""

from bufferbloat.commands.common import progress
from bufferbloat.core.errors import UsageError
from bufferbloat.plots.commands import cli_cost, cli_plot, cli_report


def cmd_plot(args):
    """Redraw a run's figures (or a sweep's / results tree's) from what is stored."""
    if args.format not in ("png", "svg", "pdf"):
        raise UsageError(f"invalid value for --format: {args.format!r} (allowed: png, svg, "
                         "pdf)")
    return cli_plot(args.path, args.format, progress=progress)


def cmd_report(args):
    """Write one self-contained HTML report for a run, a sweep or a results tree, where
    the command runs (it reads stored results only: no kernel piece, no VM needed)."""
    return cli_report(args.path, progress=progress)


def cmd_cost(args):
    """Print what the runs under a directory cost beyond their traffic, per scenario,
    from their own records."""
    return cli_cost(args.path)
