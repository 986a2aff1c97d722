"""Benchmark of a point's cost beyond its traffic (not a test): where each second goes.

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_overhead.py [--families A,B,C,D,E]
    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_overhead.py --catalogue [--only S]
                                  [--prewarm off]
    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_overhead.py --host [--repeat N]
                                  [--departures off] [--mininet-config shell]
                                  [--npm-per-process N]

Runs one quick point of each family (its scenario's first sweep point, quick profile)
with ``bufferbloat run-all --quick --only SCENARIO`` semantics, in one project VM when
this kernel lacks what the points need (one boot for all of them), and prints, per
point, its traffic time, its wall time, the overhead ratio (wall / traffic) and every
phase of the run as the engine records it (result.json ``phases_s``: resolve, record,
sampler_build, build, readback, parts, idle_rtt, prepare, sampler_start, connect,
traffic, grace, stop, collect, metrics, health, teardown, other), then the totals, and
per point the departure-timing and sender checks (their values, and the cost
of the departure trace, its start/stop phases and reader CPU; ``--departures off`` runs
the same points without it, for the side-by-side; ``--mininet-config shell`` builds with
Mininet's own ifconfig and brctl through its shells, serially, for another;
``--npm-per-process 200`` connects a NetPerfMeter part's flows from one process, the
way before 2026-11-28, for a third; ``--judge guest`` has the VM compute each run's
metrics and health itself instead of this host, the way before 2026-11-29, for a fourth).
The VM's boot (once per command) is printed from its boots record. ``--catalogue``
runs every point of the quick catalogue (``--only SCENARIO``: of some) as ``bufferbloat
run-all --quick`` does, networks kept between points of the same shape, and ends with
``overhead ratio X`` over them (``--prewarm off``: the sampler's process started cold,
the way before 2026-11-29). ``--host`` runs
host-kernel points instead (a1_fifo with no netem over three buffers, 5 s each), as a
serial sweep runs them: with the network kept between points, then with a fresh network
for every point, and ends with ``host overhead per point X s (point wall - traffic,
median of N)`` of the kept way. Asserts nothing.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: one quick point per family
FAMILIES = {"A": "a1_fifo", "B": "b1_pie_tupdate", "C": "c1_red_vs_pie",
            "D": "d1_cca_paths", "E": "e1_aqm_kflows"}
PHASES = ("resolve", "record", "sampler_build", "build", "reconfigure", "readback", "parts",
          "idle_rtt",
          "prepare", "sampler_start", "departures_start", "connect", "traffic", "grace",
          "stop", "departures_stop", "collect",
          "metrics", "health", "teardown", "other")


def run_points(scenarios, out):
    """Run each scenario's first quick sweep point into ``out`` (here); their run dirs."""
    from bufferbloat.run.engine import run_point  # noqa: PLC0415 - needs Mininet
    from bufferbloat.run.plan import points  # noqa: PLC0415
    from bufferbloat.scenarios import catalogue  # noqa: PLC0415
    cat = catalogue()
    dirs = []
    for name in scenarios:
        scn = cat[name]
        overrides = dict(next(iter(points(scn.sweep_for(True), 1)))[0]) \
            if scn.sweep_for(True) else {}
        print(f"bench: {name} {overrides}", file=sys.stderr, flush=True)
        dirs.append(run_point(scn, overrides, out_root=out, quick=True,
                              log=lambda *_: None))
    return dirs


def vm_bench_runs(script, args, prefix):
    """Run ``bench/SCRIPT ARGS --inside OUT`` in one project VM, OUT a fresh folder of
    .scratch/ named ``PREFIX*`` (inside the checkout: the VM shares it); returns (OUT,
    [(value, run dir on this machine)]) from the guest's ``RUN VALUE DIR`` lines."""
    (ROOT / ".scratch").mkdir(exist_ok=True)
    out = tempfile.mkdtemp(prefix=prefix, dir=str(ROOT / ".scratch"))
    proc = subprocess.run([str(ROOT / "vm" / "run"), "--", "python3", f"bench/{script}",
                           *args, "--inside", os.path.relpath(out, ROOT)],
                          capture_output=True, text=True)
    sys.stderr.write(proc.stderr[-3000:])
    from bufferbloat.run.where import host_path  # noqa: PLC0415
    runs = []
    for line in proc.stdout.splitlines():
        if line.startswith("RUN "):
            _, value, d = line.split(" ", 2)
            runs.append((float(value), host_path(d, out)))
    return out, runs


def table(run_dirs):
    """Print the phases of every run and the totals; return the overhead ratio (point
    wall / traffic over every run), or None without runs."""
    rows = []
    for d in run_dirs:
        with open(os.path.join(d, "result.json")) as f:
            rec = json.load(f)
        rows.append((rec["scenario"]["name"], rec["duration_s"], rec["wall_s"],
                     rec.get("phases_s", {}), (rec.get("health") or {}).get("verdict")))
    head = f"{'point':<16}{'traffic':>8}{'wall':>7}{'ratio':>7}  {'health':<9}"
    print(head + "  phases (s, largest first)")
    total_traffic = total_wall = 0.0
    sums = {}
    for name, traffic, wall, phases, verdict in rows:
        total_traffic += traffic
        total_wall += wall
        for k, v in phases.items():
            sums[k] = sums.get(k, 0.0) + v
        top = sorted(((v, k) for k, v in phases.items() if k != "traffic"), reverse=True)
        print(f"{name:<16}{traffic:>8.1f}{wall:>7.1f}{wall / traffic:>7.2f}  "
              f"{verdict or '?':<9}  " + ", ".join(f"{k} {v:.1f}" for v, k in top[:6]))
    if rows:
        print(f"{'all':<16}{total_traffic:>8.1f}{total_wall:>7.1f}"
              f"{total_wall / total_traffic:>7.2f}")
        print("phases summed over the points (s): " + ", ".join(
            f"{k} {sums[k]:.1f}" for k in PHASES if k in sums))
    for d in run_dirs:
        with open(os.path.join(d, "result.json")) as f:
            rec = json.load(f)
        checks = (rec.get("health") or {}).get("checks") or {}
        dep = rec.get("departures") or {}
        parts = [f"{k} {c.get('value')} ({c.get('limit')}, "
                 f"{'not judged' if c.get('ok') is None else 'ok' if c['ok'] else 'FAILED'})"
                 for k, c in checks.items()
                 if k.startswith(("departure_timing", "sender_kept_up"))]
        cost = (f"trace: {dep.get('departures')} departures, lost {dep.get('lost_events')}, "
                f"reader CPU {dep.get('reader_cpu_s')} s, conversion {dep.get('convert_s')} s"
                if dep.get("traced") else f"trace: off ({dep.get('why')})")
        judged = rec.get("judged") or {}
        where_judged = (f"judged {judged.get('where')}: metrics {judged.get('metrics_s')} s, "
                        f"health {judged.get('health_s')} s"
                        + (f", the guest waited {judged['wait_s']} s" if "wait_s" in judged
                           else "")
                        + (f" ({judged['host_refused']})" if "host_refused" in judged
                           else ""))
        print(f"{rec['scenario']['name']:<16}" + "; ".join(parts + [cost, where_judged]))
    return total_wall / total_traffic if rows and total_traffic else None


#: --host: a1_fifo on this kernel (HTB + pfifo, no netem), these buffers, 5 s each
HOST_BUFFERS = (20, 50, 100)
HOST_DURATION_S = 5.0


def host_bench(repeat):
    """Host-kernel points as a serial sweep runs them (in one process), two ways side by
    side: each repetition's buffers once with the network kept between points
    (bufferbloat/net/reuse.py: the first built, the others on it; each repetition starts
    at the next buffer) and once with a fresh network for every point. Prints each way's phases and, last, the median overhead
    (record wall - traffic) of each; the kept way's last."""
    import statistics  # noqa: PLC0415
    import time  # noqa: PLC0415

    from bufferbloat.net.reuse import NetworkKeeper  # noqa: PLC0415 - needs Mininet
    from bufferbloat.run.engine import run_point  # noqa: PLC0415 - needs Mininet
    from bufferbloat.scenarios import catalogue  # noqa: PLC0415
    scn = catalogue()["a1_fifo"]
    (ROOT / ".scratch").mkdir(exist_ok=True)
    out = tempfile.mkdtemp(prefix="bench-overhead-host-", dir=str(ROOT / ".scratch"))
    ways = ("kept", "fresh")
    over = {w: [] for w in ways}
    dirs = {w: [] for w in ways}
    reused, closing = [], 0.0
    for rep in range(1, repeat + 1):
        for way in ways:
            # one network per namespace: the kept one is removed before the fresh way's
            with NetworkKeeper(enabled=way == "kept") as keeper:
                # each repetition starts at another buffer: each buffer's network is
                # built once and kept for the others, the same mix as the fresh way's
                k = (rep - 1) % len(HOST_BUFFERS)
                for buf in HOST_BUFFERS[k:] + HOST_BUFFERS[:k]:
                    t = time.monotonic()
                    d = run_point(scn, {"delay_ms": "0", "buffer_pkts": str(buf)},
                                  duration_s=HOST_DURATION_S, out_root=os.path.join(out, way),
                                  rep=rep, log=lambda *_: None, keeper=keeper)
                    outer = time.monotonic() - t
                    with open(os.path.join(d, "result.json")) as f:
                        rec = json.load(f)
                    over[way].append(rec["wall_s"] - rec["duration_s"])
                    dirs[way].append(d)
                    kept = rec["network"]["reuse"]["reused"]
                    if kept:
                        reused.append(over[way][-1])
                    print(f"bench: {way:<6} buffer {buf:>3} rep {rep}: wall "
                          f"{rec['wall_s']:.2f} s (outer {outer:.2f}), "
                          f"{rec['health']['verdict']}, network "
                          f"{'reused' if kept else 'built'}", file=sys.stderr, flush=True)
            closing += keeper.closing_s
    for way in ways:
        print(f"== {way}")
        table(dirs[way])
    unhealthy = sum(json.load(open(os.path.join(d, "result.json")))["health"]["verdict"]
                    != "healthy" for way in ways for d in dirs[way])
    print(f"runs kept in {out}; {unhealthy} not healthy; {len(reused)} of "
          f"{len(dirs['kept'])} kept-way points on a kept network (median overhead "
          f"{statistics.median(reused) if reused else float('nan'):.2f} s); the kept "
          f"networks' last teardowns, outside any point: {closing:.2f} s in all")
    fresh, kept = (statistics.median(over[w]) for w in ("fresh", "kept"))
    print(f"fresh host overhead per point {fresh:.2f} s (a network built for every point, "
          f"median of {len(over['fresh'])})")
    print(f"host overhead per point {kept:.2f} s (point wall - traffic, median of "
          f"{len(over['kept'])})")
    return 0


def catalogue_bench(only, prewarm):
    """The quick catalogue as a user runs it (``bufferbloat run-all --quick``: every
    point of every scenario's quick sweep, the network kept between points of the same
    shape, in one VM boot when this kernel lacks what they need); prints every point's
    phases and, last, the overhead ratio over them."""
    (ROOT / ".scratch").mkdir(exist_ok=True)
    out = tempfile.mkdtemp(prefix="bench-overhead-catalogue-", dir=str(ROOT / ".scratch"))
    argv = [sys.executable, "-m", "bufferbloat", "run-all", "--quick", "--out", out]
    for name in only:
        argv += ["--only", name]
    env = dict(os.environ, BUFFERBLOAT_SAMPLER_PREWARM=prewarm)
    proc = subprocess.run(argv, cwd=str(ROOT), env=env, check=False)
    from bufferbloat.run.where import host_path  # noqa: PLC0415
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    dirs = []
    for e in index["done"]:
        if e["status"] == "ok":
            dirs.append(host_path(e["run_dir"], out))
    print(f"runs kept in {out} (run-all exit status {proc.returncode}; networks "
          f"{index.get('networks')})")
    ratio = table(dirs)
    healthy = sum(e.get("health") == "healthy" for e in index["done"])
    if ratio is not None:
        print(f"overhead ratio {ratio:.2f} (point wall / traffic) over the quick catalogue "
              f"({len(dirs)} points ok, {healthy} healthy, of {len(index['done'])}; "
              f"sampler prewarm {prewarm})")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="families to run, e.g. A,C (default: all five)")
    ap.add_argument("--departures", choices=("auto", "off"), default="auto",
                    help="the departure trace (env BUFFERBLOAT_DEPARTURES; default auto)")
    ap.add_argument("--mininet-config", choices=("in-process", "shell"), default="in-process",
                    help="how Mininet's nodes are configured (env BUFFERBLOAT_MININET_CONFIG;"
                         " shell: Mininet's own ifconfig and brctl, to compare)")
    ap.add_argument("--npm-per-process", type=int, default=None, metavar="N",
                    help="NetPerfMeter flows per active process (env "
                         "BUFFERBLOAT_NPM_FLOWS_PER_PROCESS; default 10; 200: every flow "
                         "in one process, the way before, to compare)")
    ap.add_argument("--judge", choices=("host", "guest"), default="host",
                    help="in the VM: who computes each run's metrics and health from its "
                         "series (default host: this machine, from the share; guest: "
                         "the VM itself, the way before, to compare)")
    ap.add_argument("--host", action="store_true",
                    help="a quick sweep of host-kernel points (a1_fifo, HTB + pfifo, 5 s, "
                         "buffers 20/50/100), the network kept between points beside a "
                         "fresh network for every point")
    ap.add_argument("--repeat", type=int, default=3, help="--host: repetitions (1-20)")
    ap.add_argument("--catalogue", action="store_true",
                    help="every point of the quick catalogue (or of --only), as "
                         "`bufferbloat run-all --quick` runs them, networks kept between "
                         "points: the ratio a student's run-all pays (~30 min in the VM)")
    ap.add_argument("--only", action="append", default=[], metavar="SCENARIO",
                    help="--catalogue: this scenario only (repeatable)")
    ap.add_argument("--prewarm", choices=("on", "off"), default="on",
                    help="--catalogue: the sampler's process started with the network "
                         "(env BUFFERBLOAT_SAMPLER_PREWARM; off: the way before, to "
                         "compare)")
    ap.add_argument("--inside", metavar="OUT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.catalogue:
        return catalogue_bench(args.only, args.prewarm)
    if args.host:
        if not 1 <= args.repeat <= 20:
            ap.error("--repeat: 1-20")
        return host_bench(args.repeat)
    wanted = [f.strip().upper() for f in args.families.split(",") if f.strip()]
    bad = [f for f in wanted if f not in FAMILIES]
    if bad:
        ap.error(f"--families: unknown {bad} (valid: {', '.join(FAMILIES)})")
    scenarios = [FAMILIES[f] for f in wanted]
    os.environ["BUFFERBLOAT_DEPARTURES"] = args.departures
    os.environ["BUFFERBLOAT_MININET_CONFIG"] = args.mininet_config
    npm_env = []
    if args.npm_per_process is not None:
        if not 1 <= args.npm_per_process <= 200:
            ap.error("--npm-per-process: 1-200 flows")
        os.environ["BUFFERBLOAT_NPM_FLOWS_PER_PROCESS"] = str(args.npm_per_process)
        npm_env = ["--env", f"BUFFERBLOAT_NPM_FLOWS_PER_PROCESS={args.npm_per_process}"]
    if args.inside:                               # in the project VM
        for d in run_points(scenarios, args.inside):
            print(f"RUN {d}", flush=True)
        return 0
    from bufferbloat.run import where  # noqa: PLC0415
    from bufferbloat.scenarios import catalogue  # noqa: PLC0415
    topos = [catalogue()[s].build()[0] for s in scenarios]
    # inside the checkout: the VM shares it (a fresh clone has no .scratch yet)
    (ROOT / ".scratch").mkdir(exist_ok=True)
    out = tempfile.mkdtemp(prefix="bench-overhead-", dir=str(ROOT / ".scratch"))
    if where.missing_kernel_pieces(topos) and not where.in_project_vm():
        rel = os.path.relpath(out, ROOT)
        boots = Path(out) / "boots.jsonl"
        env = dict(os.environ, BUFFERBLOAT_VM_BOOT_LOG=str(boots))
        judges = where.judged_here(str(ROOT)) if args.judge == "host" \
            else contextlib.nullcontext({})
        with judges as judge_env:
            judge_args = [w for k, v in judge_env.items() for w in ("--env", f"{k}={v}")]
            proc = subprocess.run([str(ROOT / "vm" / "run"), "--env",
                                   f"BUFFERBLOAT_DEPARTURES={args.departures}", "--env",
                                   f"BUFFERBLOAT_MININET_CONFIG={args.mininet_config}",
                                   *npm_env, *judge_args, "--",
                                   "python3", "bench/bench_overhead.py",
                                   "--families", ",".join(wanted),
                                   "--departures", args.departures,
                                   "--mininet-config", args.mininet_config,
                                   "--inside", rel], env=env, capture_output=True,
                                  text=True)
        sys.stderr.write(proc.stderr[-3000:])
        dirs = [where.host_path(line.split(" ", 1)[1], out)
                for line in proc.stdout.splitlines() if line.startswith("RUN ")]
        if boots.exists():
            rec = json.loads(boots.read_text().splitlines()[-1])
            print(f"VM: boot to command {rec['boots'][-1].get('boot_s')} s, "
                  f"command wall {rec.get('wall_s')} s for {len(dirs)} point(s)")
    else:
        dirs = run_points(scenarios, out)
    print(f"runs kept in {out}")
    ratio = table(dirs)
    if ratio is not None:
        print(f"overhead ratio {ratio:.2f} (point wall / traffic) over the quick "
              f"catalogue's families {','.join(wanted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
