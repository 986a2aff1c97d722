"""``bufferbloat export``: a run in another tool's format (so far flent's)."""

import os

from bufferbloat.results.flentexport import export_flent
from bufferbloat.results.records import load_run
from bufferbloat.results.records_layout import RESULT_FILE, ResultsError


def cmd_export(args):
    """Write a run in another tool's format: ``--flent``, a .flent.gz flent loads and
    plots (bufferbloat/results/flentexport.py)."""
    clock = load_run(args.run_dir).record.get("t0_realtime")   # exit 2 when corrupt
    if isinstance(clock, bool) or not isinstance(clock, (int, float)):
        raise ResultsError(f"{os.path.join(args.run_dir, RESULT_FILE)}: no t0_realtime "
                           "(the run's clock: a run that ended before its traffic "
                           "started, or a corrupt record): nothing to export")
    print(export_flent(args.run_dir, args.output))
    return 0
