"""Benchmark (not a test): are scaled runs the study's runs?

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_scaling.py [--scenarios e1_aqm_kflows,...]
                                                              [--caps e1_aqm_kflows=5,10,20]

The project VM cannot forward B's 100 Mbit/s or E's 80 Mbit/s under TCG, so it scales
their rates (and buffers, RED's thresholds, UDP rates) down to a cap, keeping every delay
(bufferbloat/net/scaling.py). This runs every quick sweep point of each scenario at
three caps (env BUFFERBLOAT_MAX_MBIT, per point) in one project VM boot, and prints,
per point and cap, the quantities physics says a rate scaling leaves unchanged:

* utilization (the bottleneck's, and goodput over the link's rate),
* queueing delay in ms (the bottleneck's mean; PIE's own estimate for B), latency
  under load in ms (B: ping RTT mean), TCP srtt over the base RTT (E),
* drop and mark %, Jain's fairness index (E),

with their spread over the caps (max - min, healthy runs only), and the quantities that
are NOT invariant, for contrast: packets in the queue and drops per second (both scale
with the rate). The last lines are a Markdown table per scenario for docs/design/scaling.md.
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

from bench_overhead import vm_bench_runs  # noqa: E402

MAX_MBIT_ENV = "BUFFERBLOAT_MAX_MBIT"
#: the scenarios the VM scales, and the caps to run them at (Mbit/s per direction: B's
#: RRUL loads both ways, and 20 each way measured work conservation 0.86 under TCG)
DEFAULT_CAPS = {"e1_aqm_kflows": (5, 10, 20), "b2_pie_target": (2.5, 5, 10)}

#: (label, selector, how): "value" as is, "per_rate" divided by the bottleneck's rate,
#: "over_base" minus the base RTT; invariant under a rate scaling in theory
INVARIANT = (
    ("utilization", "link:utilization", "value"),
    ("goodput / rate", "network:all:aggregate_throughput_mbit", "per_rate"),
    ("queueing delay, mean (ms)", "link:qdelay_mean_ms", "value"),
    ("AQM delay, mean (ms)", "link:aqm_delay_mean_ms", "value"),
    ("ping RTT, mean (ms)", "ping:rtt_mean_ms", "value"),
    ("srtt - base (ms)", "flow:srtt_mean_ms", "over_base"),
    ("drop %", "link:drop_pct", "value"),
    ("mark %", "link:mark_pct", "value"),
    ("Jain", "network:all:jain_fairness", "value"),
)
#: quantities that scale with the rate, for contrast
SCALING_WITH_RATE = (
    ("queue, mean (pkts)", "link:qlen_mean_pkts", "value"),
    ("drops per s", "link:drops_per_s", "value"),
)


def quick_points(scn):
    """The overrides of each quick sweep point of ``scn``."""
    from bufferbloat.run.plan import points  # noqa: PLC0415
    sweep = scn.sweep_for(True)
    return [dict(p[0]) for p in points(sweep, 1)] if sweep else [{}]


def inside(out, caps):
    """In the VM: every scenario x cap x quick point; prints 'RUN cap dir' per run."""
    from bufferbloat.run.engine import run_point  # noqa: PLC0415 - needs Mininet
    from bufferbloat.scenarios import catalogue  # noqa: PLC0415
    cat = catalogue()
    for name, values in caps.items():
        scn = cat[name]
        for cap in values:
            os.environ[MAX_MBIT_ENV] = f"{cap:g}"
            sub = os.path.join(out, f"cap-{cap:g}")
            os.makedirs(sub, exist_ok=True)
            for overrides in quick_points(scn):
                print(f"bench: {name} cap {cap:g} {overrides}", file=sys.stderr, flush=True)
                d = run_point(scn, overrides, out_root=sub, quick=True, log=lambda *_: None)
                print(f"RUN {cap:g} {d}", flush=True)


def quantities(run, rows):
    """{label: value} of INVARIANT and SCALING_WITH_RATE for ``run``."""
    from bufferbloat.results.headline import select  # noqa: PLC0415
    rate = float(run.record["params"]["bottleneck_mbit"])
    base = run.record.get("base_rtt_ms") or 0.0
    out = {}
    for label, selector, how in INVARIANT + SCALING_WITH_RATE:
        value = select(rows, selector)
        if value is None:
            continue
        out[label] = (value / rate if how == "per_rate"
                      else value - base if how == "over_base" else value)
    return out


def point_label(record):
    """The point's overrides as 'k=v,...' (the scenario's defaults: '-')."""
    over = record.get("overrides") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(over.items())) or "-"


def summarize(runs):
    """{scenario: {point: {cap: {"verdict": v, label: value}}}}."""
    from bufferbloat.results.metrics import run_rows  # noqa: PLC0415
    from bufferbloat.results.records import load_run  # noqa: PLC0415
    table = {}
    for cap, d in runs:
        run = load_run(d)
        entry = {"verdict": (run.record.get("health") or {}).get("verdict")}
        entry.update(quantities(run, run_rows(run)))
        table.setdefault(run.scenario_name, {}).setdefault(
            point_label(run.record), {})[cap] = entry
    return table


def spread(by_cap, label):
    """(min, max) of ``label`` over the healthy caps, or None."""
    vals = [e[label] for e in by_cap.values()
            if e.get("verdict") == "healthy" and isinstance(e.get(label), (int, float))]
    return (min(vals), max(vals)) if vals else None


def print_tables(table):
    for scn, points in table.items():
        caps = sorted({c for by_cap in points.values() for c in by_cap})
        labels = [lab for lab, _, _ in INVARIANT + SCALING_WITH_RATE
                  if any(lab in e for by_cap in points.values() for e in by_cap.values())]
        print(f"\n### {scn} (caps {', '.join(f'{c:g}' for c in caps)} Mbit/s)\n")
        print("| point | quantity | " + " | ".join(f"{c:g} Mbit/s" for c in caps)
              + " | spread (max - min) |")
        print("|---|---|" + "---|" * len(caps) + "---|")
        for point, by_cap in points.items():
            verdicts = " ".join(f"{(by_cap.get(c) or {}).get('verdict') or '-'}"
                                for c in caps)
            print(f"| {point} | health | " + " | ".join(verdicts.split()) + " | |")
            for lab in labels:
                cells = [by_cap.get(c, {}).get(lab) for c in caps]
                s = spread(by_cap, lab)
                print(f"| {point} | {lab} | "
                      + " | ".join("-" if v is None else f"{v:.3g}" for v in cells)
                      + f" | {'-' if s is None else f'{s[1] - s[0]:.3g}'} |")


def parse_caps(text, names):
    """{scenario: caps} from 'SCN=a,b,c;SCN=...' (default: DEFAULT_CAPS for ``names``)."""
    caps = {n: DEFAULT_CAPS[n] for n in names}
    for part in filter(None, (text or "").split(";")):
        name, _, values = part.partition("=")
        try:
            caps[name.strip()] = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise SystemExit(f"--caps: numbers in Mbit/s for {name!r} (got {values!r})")
    for name, values in caps.items():
        if name not in DEFAULT_CAPS or not values or any(not 1 <= v <= 1000 for v in values):
            raise SystemExit(f"--caps: {name}: scenarios {', '.join(DEFAULT_CAPS)}, "
                             f"caps 1-1000 Mbit/s")
    return caps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=",".join(DEFAULT_CAPS),
                    help=f"comma-separated, of {', '.join(DEFAULT_CAPS)}")
    ap.add_argument("--caps", default="", help="SCN=a,b,c;SCN=... Mbit/s (default "
                    + "; ".join(f"{k}={','.join(f'{c:g}' for c in v)}"
                                for k, v in DEFAULT_CAPS.items()) + ")")
    ap.add_argument("--inside", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--summarize", metavar="DIR", help="summarize the runs kept in DIR "
                    "(a bench's .scratch/bench-scaling-* folder) without running any")
    args = ap.parse_args()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    bad = [n for n in names if n not in DEFAULT_CAPS]
    if bad:
        ap.error(f"--scenarios: unknown {bad} (valid: {', '.join(DEFAULT_CAPS)})")
    caps = parse_caps(args.caps, names)
    if args.inside:
        inside(args.inside, caps)
        return 0
    if args.summarize:
        runs = [(float(p.parent.parent.parent.name.removeprefix("cap-")), str(p.parent))
                for p in sorted(Path(args.summarize).glob("cap-*/*/*/result.json"))]
        out = args.summarize
    else:
        spec = ";".join(f"{k}={','.join(f'{c:g}' for c in v)}" for k, v in caps.items())
        out, runs = vm_bench_runs("bench_scaling.py", [
            "--scenarios", ",".join(caps), "--caps", spec], "bench-scaling-")
    print_tables(summarize(runs))
    print(f"runs kept in {out}")
    print(json.dumps({"runs": len(runs)}))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
