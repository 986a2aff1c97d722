"""The bufferbloat command: check, list, describe, run, sweep, show, plot, report,
compare, export and run-all (:func:`parser`; the help texts are its DESCRIPTION, EPILOG
and each command's).

Usage errors (bad parameter, unknown scenario, missing kernel feature or tool) print one
message and exit with code 2 before any network state is created.
"""

import argparse
import json
import os
import re
import sys
import time

from bufferbloat.core.errors import EXIT_DEGRADED, EXIT_NOTHING_RECORDED, EXIT_USAGE, UsageError
from bufferbloat.core.signals import ignore_signals, interrupt_rc, silence_closed_stream


def _scenarios():
    from bufferbloat.scenarios import catalogue
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
    from bufferbloat.net.capabilities import probe
    from bufferbloat.net.network import Network
    caps = probe()
    needed = set()
    from bufferbloat.traffic.kinds import needs_of
    for name in names:
        topo, _, traffic = _scenario(name).build(hz=caps.hz)
        needed |= set(Network(topo, caps=caps).features) | set(needs_of(traffic))
    return caps, sorted(needed)


def cmd_check(args):
    """Print what this machine can emulate; with --scenario, exit 2 if it can't run it."""
    from bufferbloat.net.capabilities import probe
    names = list(_scenarios()) if args.scenario == ["all"] else (args.scenario or [])
    for name in names:
        _scenario(name)           # an unknown name: exit 2 before any output
    caps = probe()
    if args.json:
        print(json.dumps(caps.to_dict(), indent=1))
    elif not args.quiet:
        print(caps.table())
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


def cmd_describe(args):
    """Print everything about a scenario: study, topology, traffic, keys, sweep, figures,
    expected result, headline metrics."""
    from bufferbloat.describe import describe
    print("\n".join(describe(_scenario(args.scenario))))
    return 0


def _check_common(args):
    """Options every running command shares, checked before anything is built."""
    from bufferbloat.core.params import (
        DURATION_LIMITS_S,
        REPEAT_LIMITS,
        check_out_dir,
        check_range,
    )
    check_out_dir(args.out)
    if getattr(args, "time", None) is not None:
        check_range("--time", args.time, *DURATION_LIMITS_S, " s")
    if getattr(args, "repeat", None) is not None:
        check_range("--repeat", args.repeat, *REPEAT_LIMITS)
    if hasattr(args, "retry_degraded"):
        _retries(args)


def cmd_run(args):
    """Run one scenario (``--repeat`` times); a failed run is reported and the others go
    on; exit 1 if any failed."""
    from bufferbloat import summary
    from bufferbloat.run.engine import run_point
    scn = _scenario(args.scenario)
    overrides = _overrides(args.set)
    _check_common(args)
    from bufferbloat.core.params import SAMPLE_PERIOD_LIMITS_S, check_range
    check_range("--sample-ms", args.sample_ms,
                *(1000 * x for x in SAMPLE_PERIOD_LIMITS_S), " ms")
    from bufferbloat.run.identity import run_config
    from bufferbloat.run.sweep import run_one, stall_limit_s
    # every repetition's configuration (bad input: exit 2 before anything runs)
    configs = [run_config(scn, overrides, quick=args.quick, duration_s=args.time,
                          rep=i + 1, sample_period_s=args.sample_ms / 1000.0)
               for i in range(args.repeat)]
    if _place(args, [(scn, overrides)]) == "vm":
        return _run_in_vm(args)
    from bufferbloat.run.where import note_run
    failed, degraded = 0, []
    for i, config in enumerate(configs):
        limit = stall_limit_s(config)
        print(f"[{i + 1}/{args.repeat}] {scn.name} ({config['profile']} profile, "
              f"{config['duration_s']:g} s, stall limit {limit:.4g} s)", flush=True)
        def run(rep=i + 1):
            return run_point(scn, overrides, args.time, args.out, quick=args.quick,
                             sample_period_s=args.sample_ms / 1000.0, rep=rep)
        done = run_one(run, f"{scn.name} run {i + 1}", limit, _retries(args))
        if done.status != "ok":     # recorded in the run's result.json
            failed += 1
            print(f"bufferbloat: run {done.status}: {done.exc}", file=sys.stderr)
            continue
        run_dir = done.run_dir
        if done.health == "degraded":
            degraded.append(run_dir)
        elif done.health == "faulty":   # a part began early: the run's fault (exit 1)
            failed += 1
            print(f"bufferbloat: run faulty: a part started before its due time "
                  f"({run_dir}/result.json: health.faults)", file=sys.stderr)
        if note_run(run_dir):       # in the VM for a host: the host draws and summarises
            print(f"recorded in the VM: {run_dir}", flush=True)
            continue
        print("\n".join(summary.finish(run_dir, draw=not args.no_figures)), flush=True)
    return _end_status(failed, degraded)


def _topologies(args, builds):
    """The topologies of ``builds`` [(scenario, overrides)], each distinct one once (a
    derived knob, set from its provider only when the point runs, stands in here)."""
    from bufferbloat.run.derive import placeholders
    seen, topos = set(), []
    for scn, overrides in builds:
        key = (scn.name, tuple(sorted((k, str(v)) for k, v in overrides.items())))
        if key not in seen:
            seen.add(key)
            topos.append(scn.build(placeholders(scn, overrides), quick=args.quick)[0])
    return topos


def _place(args, builds):
    """'host' or 'vm' for a command whose runs are ``builds`` [(scenario, overrides)]
    (bufferbloat/run/where.py: the VM when this kernel lacks a piece they need, unless
    --host; --vm forces it); refuses a user who is not root."""
    from bufferbloat.run.where import choose, require_here, require_root
    topos = _topologies(args, builds)
    place = choose(args.where, topos, log=lambda m: print(m, file=sys.stderr, flush=True))
    require_root(place)
    if place == "host":
        require_here(topos)     # what this machine lacks, before anything starts
    return place


def _run_in_vm(args):
    """``run`` through the project VM: the guest runs and records; the runs' summaries,
    figures and reports are made here from what it recorded (in the checkout)."""
    from bufferbloat import summary
    from bufferbloat.run.where import RUNS_FILE_ENV, recorded_runs, run_in_vm, runs_file
    with runs_file(args.out) as (guest_file, host_file):
        rc = run_in_vm(args.argv, args.out, env={RUNS_FILE_ENV: guest_file})
        run_dirs = recorded_runs(host_file, args.out)
    for run_dir in run_dirs:
        print("\n".join(summary.finish(run_dir, draw=not args.no_figures)), flush=True)
    return rc


_PROGRESS = {"t": 0.0}


def progress(text):
    """A progress line on stderr ("figures of 12/40 runs"): at most one a second, and
    the last one ("N/N") always."""
    now = time.monotonic()
    done = re.search(r"(\d+)/(\d+)", text)
    if now - _PROGRESS["t"] >= 1.0 or (done and done.group(1) == done.group(2)):
        _PROGRESS["t"] = now
        print(text, file=sys.stderr, flush=True)


def _report_faulty(entries):
    """Print the runs whose health is faulty (a part began before its due time: the
    run's own fault, which no rerun clears); returns how many (they count as failed)."""
    if entries:
        print(f"faulty ({len(entries)}): a part started before its due time; kept, "
              "marked, left out of means and figures:\n  "
              + "\n  ".join(e["run_dir"] for e in entries), file=sys.stderr)
    return len(entries)


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


def cmd_sweep(args):
    """Vary parameters over a scenario (cartesian product x repetitions), resumable."""
    from bufferbloat.run.engine import run_point
    from bufferbloat.run.identity import run_config
    from bufferbloat.run.sweep import (
        check_sweep_size,
        check_vary,
        parse_vary,
        points,
        run_sweep,
    )
    scn = _scenario(args.scenario)
    _check_common(args)
    vary = parse_vary(args.vary) if args.vary else scn.sweep_for(args.quick)
    if not vary:
        raise UsageError(f"scenario {scn.name} declares no sweep: give --vary key=v1,v2")
    base = _overrides(args.set)
    # bad input: exit 2 before anything starts. The sweep's size first, counted (not
    # built), then each varied value on its own, then every point
    check_sweep_size(vary, scn.repeat if args.repeat is None else args.repeat,
                     what="--vary" if args.vary else f"the sweep of {scn.name}")
    check_vary(scn, vary, base, quick=args.quick, duration_s=args.time)
    todo = [dict(base, **o) for o, _ in points(vary, 1)]
    for overrides in todo:
        run_config(scn, overrides, quick=args.quick, duration_s=args.time)
    executor = _executor(args, [(scn, o) for o in todo])
    if executor is None and _place(args, [(scn, o) for o in todo]) == "vm":
        from bufferbloat.run.where import run_in_vm
        rc = run_in_vm(args.argv, args.out, extra=["--no-figures"])
        sweep_dir = os.path.join(args.out, scn.name, "sweep")
        if rc not in EXIT_NOTHING_RECORDED and not args.no_figures \
                and os.path.isfile(os.path.join(sweep_dir, "index.json")):
            from bufferbloat.summary import finish_sweep
            print("\n".join(finish_sweep(sweep_dir, progress=progress)))
        return rc
    # --repeat overrides the scenario's own repetitions (None: the scenario's)
    try:
        index, failed = run_sweep(scn, vary, args.repeat, args.out, run_point,
                                  quick=args.quick, duration_s=args.time, base=base,
                                  retries=_retries(args), executor=executor)
    finally:
        if executor is not None:
            executor.close()
    print(f"index: {index}")
    if not args.no_figures:
        from bufferbloat.summary import finish_sweep
        print("\n".join(finish_sweep(os.path.dirname(index), progress=progress)))
    from bufferbloat.run.sweep import degraded, faulty
    with open(index) as f:
        entries = json.load(f).get("done", [])
    return _end_status(failed + _report_faulty(faulty(entries)),
                       [e["run_dir"] for e in degraded(entries)])


def cmd_show(args):
    """Print a run's metrics table (recomputed from its stored series with --recompute)."""
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
        from bufferbloat.run.identity import setting, setting_label, short
        print(f"configuration {short(rec.get('config_key'))} (run {short(rec['run_key'])}, "
              f"rep {(rec.get('run_config') or {}).get('rep', '?')}): "
              f"{setting_label(setting(rec))}")
    print(headline(rec.get("health")))
    print(format_table(rows))
    return 0


def cmd_plot(args):
    """Redraw a run's figures (or a sweep's / results tree's) from what is stored."""
    from bufferbloat.plots.commands import cli_plot
    if args.format not in ("png", "svg", "pdf"):
        raise UsageError(f"invalid value for --format: {args.format!r} (allowed: png, svg, "
                         "pdf)")
    return cli_plot(args.path, args.format, progress=progress)


def cmd_report(args):
    """Write one self-contained HTML report for a run, a sweep or a results tree, where
    the command runs (it reads stored results only: no kernel piece, no VM needed)."""
    from bufferbloat.plots.commands import cli_report
    return cli_report(args.path, progress=progress)


def cmd_cost(args):
    """Print what the runs under a directory cost beyond their traffic, per scenario,
    from their own records."""
    from bufferbloat.plots.commands import cli_cost
    return cli_cost(args.path)


def cmd_compare(args):
    """Compare runs, sweeps or results trees: the headline metrics side by side with
    differences, and overlay figures, in the terminal and as one HTML page."""
    from bufferbloat.compare import compare
    from bufferbloat.core.errors import ParameterError
    if args.html is not None and os.path.isdir(args.html):
        raise ParameterError("--html", args.html, "a file name (this is a directory)")
    print("\n".join(compare(args.paths, args.html)))
    return 0


def cmd_export(args):
    """Write a run in another tool's format: ``--flent``, a .flent.gz flent loads and
    plots (bufferbloat/results/flentexport.py)."""
    from bufferbloat.results.flentexport import export_flent
    from bufferbloat.results.records import load_run
    from bufferbloat.results.records_layout import RESULT_FILE, ResultsError
    clock = load_run(args.run_dir).record.get("t0_realtime")   # exit 2 when corrupt
    if isinstance(clock, bool) or not isinstance(clock, (int, float)):
        raise ResultsError(f"{os.path.join(args.run_dir, RESULT_FILE)}: no t0_realtime "
                           "(the run's clock: a run that ended before its traffic "
                           "started, or a corrupt record): nothing to export")
    print(export_flent(args.run_dir, args.output))
    return 0


def catalogue_points(quick, only=None):
    """Every point run_all runs: [(scenario, overrides, varied, rep)]."""
    from bufferbloat.run.sweep import points
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
    from bufferbloat.run.engine import run_point
    from bufferbloat.run.sweep import run_points
    _check_common(args)
    todo = catalogue_points(args.quick, args.only)
    executor = _executor(args, [(scn, o) for scn, o, _, _ in todo])
    if executor is None:
        if _place(args, [(scn, o) for scn, o, _, _ in todo]) == "vm":
            from bufferbloat.run.where import run_in_vm
            return run_in_vm(args.argv, args.out)
        caps, needed = _needs(sorted({scn.name for scn, _, _, _ in todo}))
        caps.require(needed)  # refuse up front, before any network state, what can't run
    index_path = os.path.join(args.out, "index.json")
    try:
        index, failed = run_points(todo, args.out, run_point, index_path,
                                   {"catalogue": sorted({s.name for s, _, _, _ in todo})},
                                   quick=args.quick, retries=_retries(args),
                                   executor=executor)
    finally:
        if executor is not None:
            executor.close()
    ok = sum(1 for e in index if e["status"] == "ok")
    from bufferbloat.run.sweep import degraded, faulty
    bad, wrong = degraded(index), faulty(index)
    print(f"done: {ok}/{len(todo)} runs ok ({ok - len(bad) - len(wrong)} healthy, "
          f"{len(bad)} degraded{f', {len(wrong)} faulty' if wrong else ''}); "
          f"index: {index_path}")
    cost = cost_line(index)
    if cost:
        print(cost)
    if failed:
        print("failed:\n  " + "\n  ".join(
            f"{e['run_dir']}: {e.get('error', '')}" for e in index
            if e["status"] in ("failed", "stalled")),
            file=sys.stderr)
    return _end_status(failed + _report_faulty(wrong), [e["run_dir"] for e in bad])


def _executor(args, builds):
    """The Dask executor of ``--cluster ADDR`` / ``--workers N``, or None (serial, here or
    in the VM). Checked before anything is built: an address that is not tcp://HOST:PORT,
    N out of range, a scheduler that cannot be reached: exit 2. Local workers run on
    this kernel: it must have what the points need, and they need root."""
    address, workers = getattr(args, "cluster", None), getattr(args, "workers", None)
    if address is None and workers is None:
        return None
    from bufferbloat.core.params import check_range
    from bufferbloat.worker import re_address
    if address is not None and not re_address(address):
        raise UsageError(f"invalid --cluster {address!r}: give tcp://HOST:PORT (the "
                         "scheduler's default port is 8786)")
    if workers is not None:
        check_range("--workers", workers, *WORKERS_LIMITS)
        if args.where == "vm":
            raise UsageError("--workers runs its points on this kernel: it cannot be "
                             "combined with --vm (run the whole command in the VM: vm/run "
                             "-- bufferbloat ...)")
        from bufferbloat.run.where import missing_kernel_pieces, require_here, require_root
        require_root("host")
        topos = _topologies(args, builds)
        missing = missing_kernel_pieces(topos)
        if not missing or args.where == "host":
            require_here(topos)     # what this machine lacks, before anything starts
        else:
            from bufferbloat.core.paths import SOURCE_ROOT
            if workers > 1:
                raise UsageError(
                    f"this kernel lacks {', '.join(missing)}: the points run in a worker's "
                    "project VM, and one VM per machine keeps timing honest (two TCG "
                    "guests distort each other): use --workers 1 here, or --cluster with "
                    "workers on machines whose kernel has them (docs/CLUSTER.md)")
            if SOURCE_ROOT is None:
                raise UsageError(f"this kernel lacks {', '.join(missing)}: a worker runs "
                                 "such points in its project VM, from a checkout only")
            print(f"This kernel lacks {', '.join(missing)}: the worker runs the points in "
                  "its project VM, booted once for all of them", flush=True)
    from bufferbloat.run.cluster import DaskExecutor
    return DaskExecutor(address=address, workers=workers,
                        log=lambda m: print(m, flush=True))


#: --workers N: local Dask workers (one point each at a time)
WORKERS_LIMITS = (1, 64)


def _cluster_options(p):
    """--cluster ADDR / --workers N: the points on Dask workers (docs/CLUSTER.md)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cluster", metavar="tcp://HOST:PORT",
                   help="send the points to the workers of this Dask scheduler (each "
                        "started with `bufferbloat worker`), one point per worker at a time")
    g.add_argument("--workers", type=int, metavar="N",
                   help="start a local cluster of N workers on this machine and run the "
                        "points on them, N at a time (this kernel must run them)")


def cmd_worker(args):
    """A Dask worker for a cluster's points (bufferbloat/worker.py)."""
    from bufferbloat.worker import cmd_worker as run
    return run(args)


def cost_line(index):
    """What the points this command ran cost: their traffic, their wall time (each from
    its start to its record, degraded reruns included) and the ratio; None when it ran
    none."""
    ran = [e for e in index if e.get("wall_s") is not None and not e.get("resumed")
           and e.get("duration_s")]
    if not ran:
        return None
    traffic = sum(float(e["duration_s"]) for e in ran)
    wall = sum(float(e["wall_s"]) for e in ran)
    return (f"cost: {len(ran)} points run, {traffic:.0f} s of traffic, {wall:.0f} s of "
            f"point wall time: overhead ratio {wall / traffic:.2f} (point wall / traffic)")


def _retry_option(p):
    """--retry-degraded N: reruns of a run that comes out degraded (bufferbloat/run/sweep.py)."""
    p.add_argument("--retry-degraded", type=int, default=None, metavar="N",
                   help="run a point again, up to N times, when the emulator fell behind "
                        "(its run kept, marked degraded; default 1, env "
                        "BUFFERBLOAT_RETRY_DEGRADED; 0 to 10)")


def _retries(args):
    """The number of reruns of a degraded run (validated: UsageError, exit 2)."""
    from bufferbloat.core.params import check_range
    from bufferbloat.run.sweep import RETRY_DEGRADED_LIMITS, retry_degraded_default
    n = getattr(args, "retry_degraded", None)
    if n is None:
        return retry_degraded_default()
    return int(check_range("--retry-degraded", n, *RETRY_DEGRADED_LIMITS))


def _where_options(p):
    """--host / --vm: where the networks are built (bufferbloat/run/where.py)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--host", dest="where", action="store_const", const="host",
                   help="on this machine only: refuse what its kernel lacks")
    g.add_argument("--vm", dest="where", action="store_const", const="vm",
                   help="inside the project VM (default: there only when this kernel "
                        "lacks what the runs need)")
    p.set_defaults(where="auto")


DESCRIPTION = """\
Emulate a bottleneck link with Mininet, run the studies of bufferbloat and active queue
management (FIFO, PIE, CoDel, fq_codel, RED, ...) on it, and read what they recorded:
metrics, figures, HTML reports, comparisons, flent files.

Commands that build networks (run, sweep, run-all) need root and Mininet; they move into
the project VM by themselves when this kernel lacks what a scenario needs. The others
(list, describe, show, plot, report, compare, export) read stored results only."""

EPILOG = """\
examples:
  bufferbloat list                          the scenarios, one line each
  bufferbloat describe a1_fifo              a scenario's study, keys, sweep, figures
  sudo bufferbloat run a1_fifo --quick      one short run, into results/
  bufferbloat report results/a1_fifo/...    one HTML page for a run, sweep or tree
  bufferbloat compare RUN_A RUN_B --html c.html
  bufferbloat COMMAND --help                a command's options

exit codes: 0 done, 1 failed, 2 usage error (nothing was started), 5 done but a run
came out degraded (the emulator fell behind)."""


def _sub(sub, name, summary, description, examples):
    """A subcommand's parser: ``summary`` in the program's list of commands,
    ``description`` and ``examples`` (lines) on its own --help."""
    import textwrap
    return sub.add_parser(
        name, help=summary, description=textwrap.fill(description, 88),
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter)


def _out_option(p, what):
    p.add_argument("--out", default="results", metavar="DIR",
                   help=f"the directory {what} go under (default: results, here)")


def _quick_option(p):
    p.add_argument("--quick", action="store_true",
                   help="the scenario's short setting: shorter traffic and its quick sweep "
                        "(a check that everything works, not a study)")


def parser():
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="bufferbloat", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version, nargs=0,
                   help="print the version and the code's identity (git commit or "
                        "installed distribution), then exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                           title="commands")
    c = _sub(sub, "check", "what this kernel and machine can emulate",
             "Print what this machine can emulate (kernel qdiscs, tools, Mininet, root). "
             "With --scenario, also whether it can run those scenarios: exit 2 when it "
             "cannot (the scenarios' names are checked first).",
             ["bufferbloat check", "bufferbloat check --scenario a1_fifo --quiet",
              "bufferbloat check --scenario all --json"])
    c.add_argument("--scenario", action="append", metavar="NAME",
                   help="a scenario to check (repeatable), or 'all' for the catalogue")
    c.add_argument("--json", action="store_true",
                   help="print the capabilities as JSON instead of a table")
    c.add_argument("--quiet", action="store_true",
                   help="print nothing: the exit code alone says (0 can run, 2 cannot)")
    c.set_defaults(func=cmd_check)
    _sub(sub, "list", "the scenarios, one line each",
         "List every scenario of the catalogue with a one-line description.",
         ["bufferbloat list"]).set_defaults(func=cmd_list)
    d = _sub(sub, "describe", "a scenario's study, keys, variants, sweep, figures and "
             "expected result",
             "Describe a scenario: its study, the keys --set accepts and their defaults, "
             "its variants, its sweep, its figures and the expected result with theory.",
             ["bufferbloat describe a1_fifo", "bufferbloat describe b2_pie_target | less"])
    d.add_argument("scenario", help="the scenario's name (bufferbloat list)")
    d.set_defaults(func=cmd_describe)
    r = _sub(sub, "run", "run one scenario",
             "Run one scenario (or --repeat of it): build its network, run its traffic, "
             "sample the queues and flows, and record series, metrics, figures and "
             "report.html under --out.",
             ["sudo bufferbloat run a1_fifo", "sudo bufferbloat run a1_fifo --quick",
              "sudo bufferbloat run a1_fifo --set buffer_pkts=20 --time 30",
              "sudo bufferbloat run a2_pie --set qdisc.target_ms=5 --repeat 3"])
    r.add_argument("scenario", help="the scenario's name (bufferbloat list)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a parameter (repeatable; qdisc.KEY for the qdisc's own; "
                        "bufferbloat describe SCENARIO lists the keys)")
    r.add_argument("--time", type=float, metavar="S",
                   help="seconds of traffic (default: the scenario's duration)")
    _out_option(r, "the runs")
    r.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run it N times, each in its own directory (default 1)")
    _quick_option(r)
    r.add_argument("--sample-ms", type=float, default=10.0, metavar="MS",
                   help="sampler period, ms (1 to 10000; default 10)")
    r.add_argument("--no-figures", action="store_true",
                   help="end with the summary alone: no figures, no report.html")
    _retry_option(r)
    _where_options(r)
    r.set_defaults(func=cmd_run)
    w = _sub(sub, "sweep", "vary parameters of a scenario (resumable)",
             "Run a scenario at every combination of the values given (the cartesian "
             "product of the --vary lists; default: the scenario's own sweep), each "
             "point --repeat times, then draw the across-runs figures and the report. "
             "Interrupted, it resumes where it stopped when run again with the same "
             "arguments.",
             ["sudo bufferbloat sweep a1_fifo",
              "sudo bufferbloat sweep a1_fifo --vary buffer_pkts=20,100 --repeat 3",
              "sudo bufferbloat sweep a2_pie --vary qdisc=fifo,pie,codel --time 20"])
    w.add_argument("scenario", help="the scenario's name (bufferbloat list)")
    w.add_argument("--vary", action="append", metavar="KEY=V1,V2,...",
                   help="values of a key (repeatable: cartesian product); default: the "
                        "scenario's own sweep")
    w.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a parameter at every point (repeatable; qdisc.KEY for "
                        "the qdisc's own)")
    w.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="repetitions per point (default: the scenario's own)")
    w.add_argument("--time", type=float, metavar="S",
                   help="seconds of traffic per run (default: the scenario's duration)")
    _out_option(w, "the sweep's runs and index.json")
    _quick_option(w)
    w.add_argument("--no-figures", action="store_true",
                   help="no figures and no report.html at the end")
    _retry_option(w)
    _where_options(w)
    _cluster_options(w)
    w.set_defaults(func=cmd_sweep)
    s = _sub(sub, "show", "a run's metrics table",
             "Print a run's status, health and metrics table. Metrics stored by older "
             "code are recomputed from the series (not written); --recompute also "
             "writes them.",
             ["bufferbloat show results/a1_fifo/RUN",
              "bufferbloat show results/a1_fifo/RUN --recompute"])
    s.add_argument("run_dir", help="a run directory (the one holding result.json)")
    s.add_argument("--recompute", action="store_true",
                   help="recompute the metrics from the stored series and write them "
                        "(metrics.csv, metrics.json)")
    s.set_defaults(func=cmd_show)
    g = _sub(sub, "plot", "redraw the figures of a run, sweep or results tree",
             "Redraw figures from stored results (nothing is rerun): a run's into "
             "RUN/figures/; for a sweep or results tree, each run's and each set's "
             "across-runs figures and tables.",
             ["bufferbloat plot results/a1_fifo/RUN",
              "bufferbloat plot results/sweep-a1_fifo --format svg"])
    g.add_argument("path", help="a run, sweep or results directory")
    g.add_argument("--format", default="png", metavar="FORMAT",
                   help="the figures' file format: png (default), svg or pdf")
    g.set_defaults(func=cmd_plot)
    h = _sub(sub, "report", "one HTML page for a run, a sweep or results/",
             "Write one self-contained HTML page (report.html in PATH) with the "
             "studies' figures and readings, health, flags against theory, and every "
             "run's configuration, figures and metrics; print its path.",
             ["bufferbloat report results/a1_fifo/RUN", "bufferbloat report results"])
    h.add_argument("path", help="a run, sweep or results directory")
    h.set_defaults(func=cmd_report)
    o = _sub(sub, "cost", "what the runs under a directory cost beyond their traffic",
             "Print a Markdown table, per scenario and setting: runs, healthy and "
             "degraded, traffic, point wall time, their ratio, the median time a run "
             "spent beyond its traffic and its costliest phases (from each run's "
             "result.json: duration_s, wall_s, phases_s; docs/COST.md).",
             ["bufferbloat cost results"])
    o.add_argument("path", help="a run, sweep or results directory")
    o.set_defaults(func=cmd_cost)
    m = _sub(sub, "compare", "runs, sweeps or results trees side by side",
             "Print the headline metrics of runs, sweeps or results trees side by side, "
             "with the differences from the first. With --html, also write a page with "
             "the table and overlay figures (RTT eCDF, queueing delay, goodput).",
             ["bufferbloat compare RUN_FIFO RUN_PIE",
              "bufferbloat compare RUN_FIFO RUN_PIE --html compare.html"])
    m.add_argument("paths", nargs="+", metavar="PATH",
                   help="two or more run, sweep or results directories (the first is the "
                        "reference of the differences)")
    m.add_argument("--html", default=None, metavar="FILE",
                   help="also write the table and overlay figures as an HTML page to FILE "
                        "(default: write nothing)")
    m.set_defaults(func=cmd_compare)

    e = _sub(sub, "export", "a run as a flent data file (--flent)",
             "Write a run in another tool's format. --flent: a .flent.gz that flent "
             "loads and plots (flent -i FILE -p totals).",
             ["bufferbloat export --flent results/b2_pie_target/RUN",
              "bufferbloat export --flent RUN -o /tmp/b2.flent.gz"])
    e.add_argument("--flent", action="store_true", required=True,
                   help="flent's .flent.gz (the only format so far)")
    e.add_argument("run_dir", help="a run directory (the one holding result.json)")
    e.add_argument("-o", "--output", metavar="FILE",
                   help="the file to write, ending with .flent.gz (default: "
                        "RUN_DIR/run.flent.gz)")
    e.set_defaults(func=cmd_export)
    a = _sub(sub, "run-all", "run every scenario",
             "Run the whole catalogue (or --only some scenarios), every point of each "
             "scenario's sweep, with progress and a time estimate; go on past failures; "
             "write OUT/index.json.",
             ["sudo bufferbloat run-all --quick", "sudo bufferbloat run-all --only a1_fifo "
              "--only a2_pie --out /tmp/r"])
    _quick_option(a)
    _out_option(a, "every scenario's runs and index.json")
    a.add_argument("--only", action="append", metavar="SCENARIO",
                   help="run only this scenario (repeatable)")
    _retry_option(a)
    _where_options(a)
    _cluster_options(a)
    a.set_defaults(func=cmd_run_all)
    k = _sub(sub, "worker", "a Dask worker that runs a cluster's points",
             "Join a Dask scheduler as a worker that runs sweep and run-all points sent "
             "with --cluster: one point at a time, each in a network namespace of its "
             "own, as root; start one per machine (docs/CLUSTER.md). On start it removes "
             "what a dead worker of the same name left.",
             ["sudo bufferbloat worker tcp://10.0.0.1:8786",
              "sudo bufferbloat worker tcp://10.0.0.1:8786 --name lab-pc-7"])
    k.add_argument("scheduler", metavar="tcp://HOST:PORT",
                   help="the Dask scheduler's address (dask-scheduler prints it)")
    k.add_argument("--name", metavar="NAME",
                   help="this worker's name (default: the host name); a restarted worker "
                        "of the same name cleans up after its predecessor")
    k.set_defaults(func=cmd_worker)
    return p


def main(argv=None):
    """Entry point of the ``bufferbloat`` console command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.argv = argv          # what a command moving into the VM runs there again
    try:
        rc = args.func(args)
    except UsageError as err:
        print(f"bufferbloat: error: {err}", file=sys.stderr)
        rc = EXIT_USAGE
    except ModuleNotFoundError as err:
        # a library this command needs that this Python lacks (numpy, matplotlib, mininet)
        print(f"bufferbloat: error: {missing_module_text(args.cmd, err.name)}",
              file=sys.stderr)
        rc = EXIT_USAGE
    except KeyboardInterrupt as exc:
        print("bufferbloat: interrupted", file=sys.stderr)
        rc = interrupt_rc(exc)
    except OSError as err:    # a full disk, a read-only folder, a directory in the way
        print(f"bufferbloat: error: {os_error_text(err)}", file=sys.stderr)
        rc = 1
    except Exception as err:  # noqa: BLE001 - one line, not a traceback (BUFFERBLOAT_DEBUG=1)
        if os.environ.get("BUFFERBLOAT_DEBUG") == "1":
            raise
        print(f"bufferbloat: error: {args.cmd} failed: {type(err).__name__}: {err} "
              f"({_where(err)}; BUFFERBLOAT_DEBUG=1 shows the traceback)", file=sys.stderr)
        rc = 1
    return rc


class _Version(argparse.Action):
    """``--version``: the version and where the code comes from (asked only then: it
    may run git)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from bufferbloat import __version__
        from bufferbloat.core.paths import code_identity
        print(f"bufferbloat {__version__} ({code_identity()})")
        parser.exit()


def missing_module_text(cmd, name):
    """What to do when ``cmd`` cannot import the module ``name``: a part of this project
    means a broken install (never an apt package); another library, how to get it."""
    from bufferbloat.core.paths import PACKAGE_DIR, SOURCE_ROOT
    if name and (name == "bufferbloat" or name.startswith("bufferbloat.")):
        where = (f"the checkout {SOURCE_ROOT} is incomplete (git status; git checkout .)"
                 if SOURCE_ROOT else
                 f"the installed package ({PACKAGE_DIR}) is broken: reinstall it "
                 "(pip install --force-reinstall bufferbloat, or pip install . from "
                 "its checkout)")
        return f"{cmd} cannot import {name}, a module of bufferbloat itself: {where}"
    from bufferbloat.net.capabilities import python_hint
    return f"{cmd} needs the Python module {name}, {python_hint(name)}"


def os_error_text(err):
    """One line for an OSError: ``disk full: PATH`` for ENOSPC (and a quota), else
    ``PATH: what the system says``."""
    import errno
    where = err.filename if err.filename is not None else "?"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full: {where}"
    text = f"{where}: {err.strerror or err}"
    return text + (f" -> {err.filename2}" if err.filename2 else "")


def _where(err):
    """``file.py:LINE`` of the innermost frame of ``err``'s traceback."""
    import traceback
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return "?"
    return f"{os.path.relpath(frames[-1].filename)}:{frames[-1].lineno}"


class _DropClosedPipe:
    """``sys.stdout``/``sys.stderr`` for the program: output to a closed pipe (``| head``,
    a reader gone) is dropped, not fatal. On the first BrokenPipeError the stream's file
    descriptor is pointed at /dev/null (the Python docs' recipe, so that the flush at
    exit cannot fail either) and the command goes on."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            silence_closed_stream(self._stream)
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            silence_closed_stream(self._stream)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def console():
    """The ``bufferbloat`` program: :func:`main`, then exit quietly. Once ``main`` has
    returned, everything is recorded and torn down, so a SIGINT/SIGTERM has nothing left
    to stop; but Python puts the default handlers back while the interpreter finalises,
    and a signal in that window would kill the process (rc -2/-15) after a run recorded
    as complete. So the program ignores them from here on: a process-wide disposition
    (a thread mask would not do: the kernel hands a signal to any thread that does not
    block it, and the traffic tools' watcher threads may still exist)."""
    sys.stdout, sys.stderr = _DropClosedPipe(sys.stdout), _DropClosedPipe(sys.stderr)
    try:
        rc = main()
        sys.stdout.flush()
        ignore_signals()
    except KeyboardInterrupt as exc:      # one that came between main and the above
        ignore_signals()
        rc = interrupt_rc(exc)
    return rc
