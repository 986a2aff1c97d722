"""``bufferbloat run``: one scenario, ``--repeat`` times, here or in the project VM."""

import sys

from bufferbloat.commands.common import (
    check_common,
    end_status,
    parse_overrides,
    retries_of,
    scenario,
)
from bufferbloat.commands.placement import where_to_run


def cmd_run(args):
    """Run one scenario (``--repeat`` times); a failed run is reported and the others go
    on; exit 1 if any failed."""
    scn = scenario(args.scenario)
    overrides = parse_overrides(args.set)
    check_common(args)
    from bufferbloat.core.params import SAMPLE_PERIOD_LIMITS_S, check_range
    check_range("--sample-ms", args.sample_ms,
                *(1000 * x for x in SAMPLE_PERIOD_LIMITS_S), " ms")
    from bufferbloat.run.resolved import resolve_run
    # every repetition resolved, once (bad input: exit 2 before anything runs); the
    # same objects are placed and run
    runs = [resolve_run(scn, overrides, quick=args.quick, duration_s=args.time,
                        rep=i + 1, sample_period_s=args.sample_ms / 1000.0)
            for i in range(args.repeat)]
    if where_to_run(args, runs) == "vm":
        return _run_in_vm(args)
    from bufferbloat.net.reuse import NetworkKeeper
    from bufferbloat.run.where import note_run
    with NetworkKeeper() as keeper:      # a repetition's network serves the next one
        return _run_here(args, scn, runs, keeper, note_run)


def _run_here(args, scn, runs, keeper, note_run):
    """The repetitions ``runs`` here, one after the other."""
    from bufferbloat import summary
    from bufferbloat.run import engine
    from bufferbloat.run.watch import run_one, stall_limit_s
    failed, degraded = 0, []
    for i, resolved in enumerate(runs):
        limit = stall_limit_s(resolved.config)
        print(f"[{i + 1}/{args.repeat}] {scn.name} ({resolved.profile} profile, "
              f"{resolved.duration_s:g} s, stall limit {limit:.4g} s)", flush=True)

        def run(resolved=resolved):
            return engine.run_resolved(resolved, args.out, keeper=keeper)
        done = run_one(run, f"{scn.name} run {i + 1}", limit, retries_of(args))
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
    return end_status(failed, degraded)


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
