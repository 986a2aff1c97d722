"""``bufferbloat sweep``: a scenario at every point of a sweep, resumable, here, in the
project VM or on Dask workers."""

import json
import os

from bufferbloat.commands.common import (
    _check_common,
    _end_status,
    _overrides,
    _report_faulty,
    _retries,
    _scenario,
    progress,
)
from bufferbloat.commands.placement import _executor, _place
from bufferbloat.core.errors import EXIT_NOTHING_RECORDED, UsageError


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
