"""``bufferbloat show``: a run's status, health and metrics table."""

from bufferbloat.core.errors import warn
from bufferbloat.results.health import headline
from bufferbloat.results.metrics import (
    compute_metrics,
    format_table,
    run_rows,
    series_cut,
    write_metrics,
)
from bufferbloat.results.records import load_run
from bufferbloat.run.identity import setting, setting_label, short


def cmd_show(args):
    """Print a run's metrics table (recomputed from its stored series with --recompute)."""
    run = load_run(args.run_dir)
    if args.recompute:
        cut = series_cut(run)
        if cut:
            warn(f"{run.dir}: {cut}; the metrics recomputed over it replace the stored "
                 "ones")
        rows = compute_metrics(run, warmup_s=run.warmup_s)
        write_metrics(run, rows, warmup_s=run.warmup_s)
    else:
        rows = run_rows(run)
    rec = run.record
    started = f"started {rec['started']}" if rec.get("started") else "start not recorded"
    print(f"{run.scenario_name}  status {rec.get('status', 'not recorded')}  {started}  "
          f"{rec.get('duration_s', '?')} s")
    missing = run.missing_series()
    print("series: " + (", ".join(n for n in run.series_names() if n not in missing)
                        or "none")
          + (f" (listed but not on disk: {', '.join(missing)})" if missing else ""))
    if rec.get("run_key"):
        print(f"configuration {short(rec.get('config_key'))} (run {short(rec['run_key'])}, "
              f"rep {(rec.get('run_config') or {}).get('rep', '?')}): "
              f"{setting_label(setting(rec))}")
    print(headline(rec.get("health")))
    print(format_table(rows))
    return 0
