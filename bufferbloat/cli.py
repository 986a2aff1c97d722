"""The ``bufferbloat`` command: check, list, run, sweep, show, plot, report, run-all.

Usage errors (bad parameter, unknown scenario, missing kernel feature or tool) print one
message and exit with code 2 before any network state is created.
"""

import argparse
import json
import os
import signal
import sys
import time

from .errors import EXIT_DEGRADED, EXIT_USAGE, UsageError


def _scenarios():
    from scenarios import catalogue
    return catalogue()


def _scenario(name):
    cat = _scenarios()
    if name not in cat:
        raise UsageError(f"unknown scenario {name!r} (valid: {', '.join(cat)})")
    return cat[name]


def _overrides(pairs):
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"invalid --set {pair!r} (expected key=value)")
        out[key.strip()] = value.strip()
    return out


def _needs(names):
    """(capabilities, features the named scenarios need on this machine)."""
    from .capabilities import probe
    from .network import Network
    caps = probe()
    needed = set()
    from .traffic.base import needs_of
    for name in names:
        topo, _, traffic = _scenario(name).build(hz=caps.hz)
        needed |= set(Network(topo, caps=caps).features) | set(needs_of(traffic))
    return caps, sorted(needed)


def cmd_check(args):
    """Print what this machine can emulate; with --scenario, exit 2 if it can't run it."""
    from .capabilities import probe
    caps = probe()
    if args.json:
        print(json.dumps(caps.to_dict(), indent=1))
    elif not args.quiet:
        print(caps.table())
    names = list(_scenarios()) if args.scenario == ["all"] else (args.scenario or [])
    blocked = []
    for name in names:
        missing = [f for f in _needs([name])[1] if not caps.has(f)]
        if missing:
            blocked.append(f"{name}: needs {', '.join(missing)}")
    if blocked:
        if not args.quiet:
            print("\nscenarios this machine cannot run:\n  " + "\n  ".join(blocked))
        return EXIT_USAGE
    return 0


def cmd_list(_args):
    """List scenarios with one-line descriptions."""
    for name, scn in _scenarios().items():
        print(f"{name:<16} {scn.description}")
    return 0


def _check_common(args):
    """Options every running command shares, checked before anything is built."""
    from .engine import check_out_dir
    check_out_dir(args.out)
    if getattr(args, "time", None) is not None and not 1 <= args.time <= 86400:
        raise UsageError(f"invalid value for --time: {args.time:g} (allowed: 1 to 86400 s)")
    if getattr(args, "repeat", None) is not None and not 1 <= args.repeat <= 1000:
        raise UsageError(f"invalid value for --repeat: {args.repeat} (allowed: 1 to 1000)")


def cmd_run(args):
    """Run one scenario (``--repeat`` times); a failed run is reported and the others go
    on; exit 1 if any failed."""
    from .engine import run_point
    from .health import headline, verdict_of
    from .metrics import format_table
    from .results import load_run
    scn = _scenario(args.scenario)
    overrides = _overrides(args.set)
    _check_common(args)
    if not 1 <= args.sample_ms <= 10000:
        raise UsageError(f"invalid value for --sample-ms: {args.sample_ms:g} (allowed: 1 "
                         "to 10000 ms)")
    from .identity import run_config
    from .sweep import PointStalled, stall_limit_s, watchdog
    # every repetition's configuration (bad input: exit 2 before anything runs)
    configs = [run_config(scn, overrides, quick=args.quick, duration_s=args.time,
                          rep=i + 1, sample_period_s=args.sample_ms / 1000.0)
               for i in range(args.repeat)]
    failed, degraded = 0, []
    for i, config in enumerate(configs):
        limit = stall_limit_s(config)
        print(f"[{i + 1}/{args.repeat}] {scn.name} ({config['profile']} profile, "
              f"{config['duration_s']:g} s, stall limit {limit:.4g} s)", flush=True)
        try:
            with watchdog(limit, f"{scn.name} run {i + 1}"):
                run_dir = run_point(scn, overrides, args.time, args.out, quick=args.quick,
                                    sample_period_s=args.sample_ms / 1000.0, rep=i + 1)
        except (UsageError, KeyboardInterrupt):
            raise
        except PointStalled as exc:
            failed += 1
            print(f"bufferbloat: run stalled: {exc}", file=sys.stderr)
            continue
        except Exception as exc:  # noqa: BLE001 - recorded in the run's result.json
            failed += 1
            print(f"bufferbloat: run failed: {exc}", file=sys.stderr)
            continue
        run = load_run(run_dir)
        print(f"result: {run_dir}")
        print(headline(run.record.get("health")))
        if verdict_of(run.record) == "degraded":
            degraded.append(run_dir)
        print(format_table(_metrics_rows(run)))
    return _end_status(failed, degraded)


def _end_status(failed, degraded_dirs):
    """Exit status of a command that ran several points: 1 if any failed, else
    EXIT_DEGRADED (listing them) if any is degraded, else 0."""
    if degraded_dirs:
        print(f"degraded ({len(degraded_dirs)}): the emulator fell behind; kept, marked, "
              "left out of means and figures:\n  " + "\n  ".join(degraded_dirs),
              file=sys.stderr)
    if failed:
        return 1
    return EXIT_DEGRADED if degraded_dirs else 0


def _metrics_rows(run):
    path = os.path.join(run.dir, "metrics.json")
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        return data["metrics"] if isinstance(data, dict) else data
    from .metrics import compute_metrics
    return compute_metrics(run, warmup_s=run.record.get("warmup_s", 0.0))


def cmd_sweep(args):
    """Vary parameters over a scenario (cartesian product x repetitions), resumable."""
    from .engine import run_point
    from .sweep import parse_vary, run_sweep
    scn = _scenario(args.scenario)
    _check_common(args)
    vary = parse_vary(args.vary) if args.vary else scn.sweep_for(args.quick)
    if not vary:
        raise UsageError(f"scenario {scn.name} declares no sweep: give --vary key=v1,v2")
    # --repeat overrides the scenario's own repetitions (None: the scenario's)
    index, failed = run_sweep(scn, vary, args.repeat, args.out, run_point, quick=args.quick,
                              duration_s=args.time, base=_overrides(args.set))
    print(f"index: {index}")
    from .sweep import degraded
    with open(index) as f:
        entries = json.load(f).get("done", [])
    return _end_status(failed, [e["run_dir"] for e in degraded(entries)])


def cmd_show(args):
    """Print a run's metrics table (recomputed from its stored series with --recompute)."""
    from .health import headline
    from .metrics import compute_metrics, format_table, write_metrics
    from .results import load_run
    run = load_run(args.run_dir)
    if args.recompute:
        rows = compute_metrics(run, warmup_s=run.record.get("warmup_s", 0.0))
        write_metrics(run, rows, warmup_s=run.record.get("warmup_s", 0.0))
    else:
        rows = _metrics_rows(run)
    rec = run.record
    print(f"{rec.get('scenario', {}).get('name', '?')}  status {rec.get('status')}  "
          f"started {rec.get('started', '?')}  {rec.get('duration_s', '?')} s")
    if rec.get("run_key"):
        from .identity import setting, setting_label, short
        print(f"configuration {short(rec.get('config_key'))} (run {short(rec['run_key'])}, "
              f"rep {(rec.get('run_config') or {}).get('rep', '?')}): "
              f"{setting_label(setting(rec))}")
    print(headline(rec.get("health")))
    print(format_table(rows))
    return 0


def cmd_plot(args):
    """Redraw a run's figures (or a sweep's / results tree's) from what is stored."""
    import plots
    if args.format not in ("png", "svg", "pdf"):
        raise UsageError(f"invalid value for --format: {args.format!r} (allowed: png, svg, "
                         "pdf)")
    return plots.cli_plot(args.path, args.format)


def cmd_report(args):
    """Write one self-contained HTML report for a run, a sweep or a results tree."""
    import plots
    return plots.cli_report(args.path)


def catalogue_points(quick, only=None):
    """Every point run_all runs: [(scenario, overrides, varied, rep)]."""
    from .sweep import points
    cat = _scenarios()
    names = only or list(cat)
    for name in names:
        _scenario(name)
    todo = []
    for name in names:
        scn = cat[name]
        for varied, rep in points(scn.sweep_for(quick), 1 if quick else scn.repeat):
            todo.append((scn, dict(varied), varied, rep))
    return todo


def cmd_run_all(args):
    """Run the whole catalogue with progress; go on past failures; write an index."""
    from .engine import run_point
    from .sweep import run_points
    _check_common(args)
    todo = catalogue_points(args.quick, args.only)
    caps, needed = _needs(sorted({scn.name for scn, _, _, _ in todo}))
    caps.require(needed)  # refuse up front, before any network state, what can't run here
    index_path = os.path.join(args.out, "index.json")
    index, failed = run_points(todo, args.out, run_point, index_path,
                               {"catalogue": sorted({s.name for s, _, _, _ in todo})},
                               quick=args.quick)
    ok = sum(1 for e in index if e["status"] == "ok")
    from .sweep import degraded
    bad = degraded(index)
    print(f"done: {ok}/{len(todo)} runs ok ({ok - len(bad)} healthy, {len(bad)} degraded); "
          f"index: {index_path}")
    if failed:
        print("failed:\n  " + "\n  ".join(
            f"{e['run_dir']}: {e.get('error', '')}" for e in index
            if e["status"] in ("failed", "stalled")),
            file=sys.stderr)
    return _end_status(failed, [e["run_dir"] for e in bad])


def parser():
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="bufferbloat", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="what this kernel and machine can emulate")
    c.add_argument("--scenario", action="append", help="scenario name, or 'all'")
    c.add_argument("--json", action="store_true")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_check)
    sub.add_parser("list", help="scenarios").set_defaults(func=cmd_list)
    r = sub.add_parser("run", help="run one scenario")
    r.add_argument("scenario")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a parameter (qdisc.KEY for the qdisc's own)")
    r.add_argument("--time", type=float, help="seconds of traffic")
    r.add_argument("--out", default="results")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--quick", action="store_true")
    r.add_argument("--sample-ms", type=float, default=10.0,
                   help="sampler period, ms (1 to 10000; default 10)")
    r.set_defaults(func=cmd_run)
    w = sub.add_parser("sweep", help="vary parameters of a scenario (resumable)")
    w.add_argument("scenario")
    w.add_argument("--vary", action="append", metavar="KEY=V1,V2,...",
                   help="values of a key (repeatable: cartesian product); default: the "
                        "scenario's own sweep")
    w.add_argument("--set", action="append", metavar="KEY=VALUE")
    w.add_argument("--repeat", type=int, default=None,
                   help="repetitions per point (default: the scenario's own)")
    w.add_argument("--time", type=float)
    w.add_argument("--out", default="results")
    w.add_argument("--quick", action="store_true")
    w.set_defaults(func=cmd_sweep)
    s = sub.add_parser("show", help="a run's metrics table")
    s.add_argument("run_dir")
    s.add_argument("--recompute", action="store_true",
                   help="recompute the metrics from the stored series")
    s.set_defaults(func=cmd_show)
    g = sub.add_parser("plot", help="redraw the figures of a run, sweep or results tree")
    g.add_argument("path")
    g.add_argument("--format", default="png", help="png (default), svg or pdf")
    g.set_defaults(func=cmd_plot)
    h = sub.add_parser("report", help="one HTML page for a run, a sweep or results/")
    h.add_argument("path")
    h.set_defaults(func=cmd_report)
    a = sub.add_parser("run-all", help="run every scenario")
    a.add_argument("--quick", action="store_true")
    a.add_argument("--out", default="results")
    a.add_argument("--only", action="append", help="run only these scenarios")
    a.set_defaults(func=cmd_run_all)
    return p


def main(argv=None):
    """Entry point of the ``bufferbloat`` console command."""
    args = parser().parse_args(argv)
    try:
        rc = args.func(args)
    except UsageError as err:
        print(f"bufferbloat: error: {err}", file=sys.stderr)
        rc = EXIT_USAGE
    except KeyboardInterrupt as exc:
        print("bufferbloat: interrupted", file=sys.stderr)
        rc = _interrupt_rc(exc)
    return rc


def console():
    """The ``bufferbloat`` program: :func:`main`, then exit quietly. Once ``main`` has
    returned, everything is recorded and torn down, so a SIGINT/SIGTERM has nothing left
    to stop; but Python puts the default handlers back while the interpreter finalises,
    and a signal in that window would kill the process (rc -2/-15) after a run recorded
    as complete. So the program ignores them from here on: a process-wide disposition
    (a thread mask would not do: the kernel hands a signal to any thread that does not
    block it, and the traffic tools' watcher threads may still exist)."""
    try:
        rc = main()
        _ignore_signals()
    except KeyboardInterrupt as exc:      # one that came between main and the above
        _ignore_signals()
        rc = _interrupt_rc(exc)
    return rc


def _interrupt_rc(exc):
    """128 + the signal that interrupted the command (SIGTERM 143, SIGINT 130)."""
    return 143 if "SIGTERM" in str(exc) else 130


def _ignore_signals():
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
