"""``bufferbloat sweep``: a scenario at every point of a sweep, resumable, here, in the
project VM or on Dask workers."""

import json
import os

from bufferbloat.commands.common import (
    check_common,
    end_status,
    parse_overrides,
    point_runner,
    precision_rule,
    progress,
    report_faulty,
    retries_of,
    scenario,
)
from bufferbloat.commands.placement import executor_for, where_to_run
from bufferbloat.core.errors import EXIT_NOTHING_RECORDED, UsageError


def cmd_sweep(args):
    """Vary parameters over a scenario (cartesian product x repetitions), resumable."""
    from bufferbloat.run.plan import check_sweep_size, parse_vary, plan_sweep
    from bufferbloat.run.sweep import run_sweep
    scn = scenario(args.scenario)
    check_common(args)
    precision = precision_rule(args, scn)
    vary = parse_vary(args.vary) if args.vary else scn.sweep_for(args.quick)
    if not vary and args.repeat is None and precision is None:
        raise UsageError(f"scenario {scn.name} declares no sweep: give --vary key=v1,v2, "
                         "or --repeat N / --precision P to repeat its one setting")
    vary = vary or {}      # repetitions of the scenario's own setting: one point
    base = parse_overrides(args.set)
    # bad input: exit 2 before anything starts. The sweep's size first, counted (not
    # built), then every point resolved, once: the same objects are placed and run
    repeat = precision.min_reps if precision else args.repeat
    check_sweep_size(vary, scn.repeat if repeat is None else repeat,
                     what="--vary" if args.vary else f"the sweep of {scn.name}")
    planned = plan_sweep(scn, vary, repeat, base, quick=args.quick, duration_s=args.time)
    runs = [p.run for p in planned]
    executor = executor_for(args, runs)
    if executor is None and where_to_run(args, runs) == "vm":
        from bufferbloat.run.where import run_in_vm
        rc = run_in_vm(args.argv, args.out, extra=["--no-figures"])
        sweep_dir = os.path.join(args.out, scn.name, "sweep")
        if rc not in EXIT_NOTHING_RECORDED and not args.no_figures \
                and os.path.isfile(os.path.join(sweep_dir, "index.json")):
            from bufferbloat.summary import finish_sweep
            print("\n".join(finish_sweep(sweep_dir, progress=progress)))
        return rc
    # --repeat overrides the scenario's own repetitions (None: the scenario's)
    with point_runner(executor) as runner:
        index, failed = run_sweep(scn, vary, repeat, args.out, runner,
                                  quick=args.quick, duration_s=args.time, base=base,
                                  retries=retries_of(args), executor=executor,
                                  planned=planned, precision=precision)
    print(f"index: {index}")
    if not args.no_figures:
        from bufferbloat.summary import finish_sweep
        print("\n".join(finish_sweep(os.path.dirname(index), progress=progress)))
    from bufferbloat.run.index import degraded, faulty
    with open(index) as f:
        entries = json.load(f).get("done", [])
    return end_status(failed + report_faulty(faulty(entries)),
                       [e["run_dir"] for e in degraded(entries)])
