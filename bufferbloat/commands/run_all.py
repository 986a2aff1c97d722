"""``bufferbloat run-all``: every point of every scenario's sweep (or of --only some),
going on past failures, with an index and what the points cost."""

import os
import sys

from bufferbloat.commands.common import (
    check_common,
    end_status,
    point_runner,
    precision_rule,
    report_faulty,
    retries_of,
    scenario,
    scenarios,
)
from bufferbloat.commands.placement import executor_for, needs, where_to_run


def catalogue_points(quick, only=None, reps=None):
    """Every point run_all runs: [(scenario, overrides, varied, rep)] (``reps``: each
    configuration's repetitions, default 1 in the quick profile, else the scenario's)."""
    from bufferbloat.run.plan import points
    cat = scenarios()
    names = only or list(cat)
    for name in names:
        scenario(name)
    todo = []
    for name in names:
        scn = cat[name]
        n = (reps if reps and not scn.derived else None) or (1 if quick else scn.repeat)
        for varied, rep in points(scn.sweep_for(quick), n):
            todo.append((scn, dict(varied), varied, rep))
    return todo


def cmd_run_all(args):
    """Run the whole catalogue with progress; go on past failures; write an index."""
    from bufferbloat.run.plan import plan_points
    from bufferbloat.run.sweep import run_points
    check_common(args)
    chosen = [scenario(n) for n in args.only or scenarios()]
    precision = precision_rule(args, *chosen, refuse_derived=False)
    fixed = [s.name for s in chosen if precision and s.derived]
    if fixed:
        print(f"--precision: {', '.join(fixed)} keep their own repetitions (their streams "
              "are paced from the bulk run of the same repetition)", flush=True)
    todo = catalogue_points(args.quick, args.only,
                            reps=precision.min_reps if precision else None)
    # every point resolved, once: the same objects are placed and run
    planned = plan_points(todo, quick=args.quick)
    runs = [p.run for p in planned]
    executor = executor_for(args, runs)
    if executor is None:
        if where_to_run(args, runs) == "vm":
            from bufferbloat.run.where import run_in_vm
            return run_in_vm(args.argv, args.out)
        caps, needed = needs(runs)
        caps.require(needed)  # refuse up front, before any network state, what can't run
    index_path = os.path.join(args.out, "index.json")
    with point_runner(executor) as runner:
        index, failed = run_points(planned, args.out, runner, index_path,
                                   {"catalogue": sorted({s.name for s, _, _, _ in todo})},
                                   retries=retries_of(args), executor=executor,
                                   precision=precision)
    ok = sum(1 for e in index if e["status"] == "ok")
    from bufferbloat.run.index import degraded, faulty
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
    return end_status(failed + report_faulty(wrong), [e["run_dir"] for e in bad])


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
