"""``bufferbloat compare``: runs, sweeps or results trees side by side
(bufferbloat/compare.py), in the terminal and, with --html, as one page."""

import os

from bufferbloat.compare import compare
from bufferbloat.core.errors import ParameterError


def cmd_compare(args):
    """Compare runs, sweeps or results trees: the headline metrics side by side with
    differences, and overlay figures, in the terminal and as one HTML page."""
    if args.html is not None and os.path.isdir(args.html):
        raise ParameterError("--html", args.html, "a file name (this is a directory)")
    print("\n".join(compare(args.paths, args.html)))
    return 0
