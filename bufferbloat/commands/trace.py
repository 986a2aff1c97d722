"""``bufferbloat trace``: a capacity trace in mahimahi's format (bufferbloat/net/tracegen.py),
checked as ``--set link_trace`` will read it."""

import os

from bufferbloat.core.atomic import write_text_atomic
from bufferbloat.core.errors import UsageError
from bufferbloat.net import linktrace, tracegen


def profile_of(args):
    """The (seconds, mbit) steps the arguments ask for."""
    if args.kind == "constant":
        return tracegen.constant(args.seconds, args.mbit)
    if args.kind == "square":
        if not args.half_period > 0:
            raise UsageError("--half-period must be above 0 s")
        return tracegen.square(args.seconds, args.low, args.high, args.half_period)
    if args.kind == "walk":
        if not args.mbit > 0:
            raise UsageError("--mbit must be above 0 for a walk")
        return tracegen.random_walk(args.seconds, args.mbit, seed=args.seed)
    if args.kind == "steps":
        if not args.steps:
            raise UsageError("steps needs --steps SECONDS:MBIT,...")
        return linktrace.parse_schedule(args.steps, "--steps")
    if not args.csv:
        raise UsageError("csv needs --csv FILE")
    if not os.path.isfile(args.csv) or not os.access(args.csv, os.R_OK):
        raise UsageError(f"--csv {args.csv}: no such readable file")
    return tracegen.read_rate_csv(args.csv)


def cmd_trace(args):
    """Write the trace, read it back as link_trace does, say what it is."""
    if args.seconds <= 0 or args.seconds > 86400:
        raise UsageError("--seconds must be above 0 and at most 86400")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder) or os.path.isdir(args.output):
        raise UsageError(f"--output {args.output}: its folder does not exist, or it is a "
                         "folder (give a file path in an existing folder)")
    text = tracegen.mahimahi_text(profile_of(args))
    write_text_atomic(args.output, text)
    s = linktrace.load_trace(args.output).summary()
    print(f"{args.output}: {text.count(chr(10))} opportunities, period {s['period_s']:g} s, "
          f"mean {s['mean_mbit']:g} Mbit/s ({s['min_mbit']:g}-{s['max_mbit']:g} per 10 ms), "
          f"sha256 {s['sha256'][:12]}")
    return 0
