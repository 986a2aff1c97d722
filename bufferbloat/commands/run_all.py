"""``bufferbloat run-all``: every point of every scenario's sweep (or of --only some),
going on past failures, with an index and what the points cost."""

import os
import sys

from bufferbloat.commands.common import (
    _check_common,
    _end_status,
    _report_faulty,
    _retries,
    _scenario,
    _scenarios,
)
from bufferbloat.commands.placement import _executor, _needs, _place


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
