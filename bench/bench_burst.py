"""Benchmark (not a test): the TCG VM's shaper burst decided by measurement.

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_burst.py [--bursts 0,5,10,20]
                                                            [--families A,B,C,D,E] [--reps 2]

For each HTB burst (ms of the class's rate; 0 is tc's one-MTU burst, 1600 B) it runs one
quick point of each family (bench_overhead's points: each scenario's first quick sweep
point) ``--reps`` times, in one project VM boot (env BUFFERBLOAT_HTB_BURST_MS set per
burst), and prints per burst and point: the health verdicts, work conservation, the
departure timing (p99 gap error, share of gaps within 10 % of ideal), the sender check,
and every headline metric of the family, as the mean and the spread (min-max) over the
healthy repetitions only. The last lines are a Markdown table for docs/design/health.md.
Asserts nothing; the runs are kept under .scratch/.
"""

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_overhead import FAMILIES, run_points, vm_bench_runs  # noqa: E402

HTB_BURST_ENV = "BUFFERBLOAT_HTB_BURST_MS"


def inside(out, bursts, families, reps):
    """In the VM: every burst x point x repetition; prints RUN burst dir per run."""
    scenarios = [FAMILIES[f] for f in families]
    for burst in bursts:
        os.environ[HTB_BURST_ENV] = str(burst)
        for rep in range(reps):
            sub = os.path.join(out, f"burst-{burst:g}", f"rep-{rep + 1}")
            os.makedirs(sub, exist_ok=True)
            for d in run_points(scenarios, sub):
                print(f"RUN {burst:g} {d}", flush=True)


def summarize(runs):
    """{(burst, scenario): {"verdicts": [...], figures: [values of healthy runs]}}."""
    from bufferbloat.results.headline import values  # noqa: PLC0415
    from bufferbloat.results.records import load_run  # noqa: PLC0415
    from bufferbloat.scenarios import catalogue  # noqa: PLC0415
    cat = catalogue()
    table = {}
    for burst, d in runs:
        run = load_run(d)
        key = (burst, run.scenario_name)
        entry = table.setdefault(key, {"verdicts": [], "figures": {}})
        h = run.record.get("health") or {}
        entry["verdicts"].append(h.get("verdict"))
        if h.get("verdict") != "healthy":
            continue
        figs = entry["figures"]
        for name, c in (h.get("checks") or {}).items():
            short = name.split(":")[0]
            if short in ("work_conservation", "departure_timing", "sender_kept_up"):
                figs.setdefault(f"{short} ({name.split(':')[1] if ':' in name else ''})",
                                []).append(c.get("value"))
                if short == "departure_timing" and c.get("within_10pct") is not None:
                    figs.setdefault("gaps within 10 %", []).append(c["within_10pct"])
        for item in values(run, catalogue=cat):
            if item["value"] is not None:
                figs.setdefault(item["label"], []).append(item["value"])
    return table


def _fmt(vals):
    vals = [v for v in vals if isinstance(v, (int, float))]
    if not vals:
        return "-"
    mean = sum(vals) / len(vals)
    return f"{mean:.3g}" + (f" ({min(vals):.3g}-{max(vals):.3g})" if len(vals) > 1 else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bursts", default="0,5,10,20",
                    help="HTB burst times, ms (0: tc's one-MTU burst)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--inside", metavar="OUT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        bursts = [float(b) for b in args.bursts.split(",") if b.strip()]
    except ValueError:
        ap.error(f"--bursts: numbers in ms, comma-separated (got {args.bursts!r})")
    if any(not 0 <= b <= 1000 for b in bursts):
        ap.error("--bursts: each 0 to 1000 ms")
    families = [f.strip().upper() for f in args.families.split(",") if f.strip()]
    bad = [f for f in families if f not in FAMILIES]
    if bad or not 1 <= args.reps <= 10:
        ap.error(f"--families: unknown {bad} (valid: {', '.join(FAMILIES)}); --reps 1-10")
    if args.inside:
        inside(args.inside, bursts, families, args.reps)
        return 0
    out, runs = vm_bench_runs("bench_burst.py", [
        "--bursts", args.bursts, "--families", ",".join(families),
        "--reps", str(args.reps)], "bench-burst-")
    table = summarize(runs)
    for (burst, scn), entry in sorted(table.items()):
        print(f"burst {burst:g} ms  {scn}: verdicts {entry['verdicts']}")
        for name, vals in entry["figures"].items():
            print(f"    {name}: {_fmt(vals)}")
    print("\n| burst | point | healthy | work conservation | departure p99 (ms) | "
          "gaps within 10 % | headline |")
    print("|---|---|---|---|---|---|---|")
    for (burst, scn), entry in sorted(table.items()):
        f = entry["figures"]
        pick = lambda prefix: _fmt(next((v for k, v in f.items()  # noqa: E731
                                         if k.startswith(prefix)), []))
        head = "; ".join(f"{k} {_fmt(v)}" for k, v in f.items()
                         if not k.startswith(("work_conservation", "departure_timing",
                                              "sender_kept_up", "gaps within")))
        healthy = sum(v == "healthy" for v in entry["verdicts"])
        print(f"| {'1 MTU' if burst == 0 else f'{burst:g} ms'} | {scn} | "
              f"{healthy}/{len(entry['verdicts'])} | {pick('work_conservation')} | "
              f"{pick('departure_timing')} | {pick('gaps within')} | {head} |")
    print(f"runs kept in {out}")
    print(json.dumps({"runs": len(runs)}))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
