"""The emulator's envelope (a benchmark, not a test): which loads does this machine carry
faithfully? Sweeps rate x flows x segment size x directions and prints, per point, the
bottleneck's work conservation while backlogged (each loaded direction), the sampler's
missed ticks and CPU share, the worst flow start lag and the health verdict
(bufferbloat/results/health.py). Meant for the project VM:

    vm/run -- python3 bench/bench_envelope.py [--rates 10,20] [--flows 1,5,40]
        [--mss 1448,536] [--dirs up,both] [--tool iperf,netperfmeter] [--time 15]
        [--tcp-ms 10] [--rt 0]

--tool: iperf (a client and a server per flow) or netperfmeter (every flow of a
direction in one process, connected before the clock starts; 536 B segments come from
the hosts' advertised MSS, as in study C; one flow for a loaded reverse direction).

--tcp-ms: how often the sockets are sampled (the queue always every 10 ms); --rt: the
sampler's SCHED_FIFO priority (0: none). docs/design/health.md keeps the table.
"""

import argparse
import itertools
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bufferbloat.results.records import load_run  # noqa: E402
from bufferbloat.run.engine import SAMPLER_RT_ENV, run_point  # noqa: E402
from bufferbloat.run.scenario import Scenario  # noqa: E402


def scenario(rate, flows, mss, dirs, tcp_ms, delay_ms=10, switch="auto", tool="iperf"):
    """A dumbbell at ``rate`` with ``flows`` greedy flows each loaded direction (by
    ``tool``), 10 ms per link (40 ms base RTT), a 200-packet FIFO, segments of ``mss``
    bytes."""
    params = dict(bottleneck_mbit=rate, delay_ms=delay_ms, qdisc="fifo", buffer_pkts=200,
                  cca="cubic", aqm_both_ways=dirs == "both", switch=switch)
    if tool == "iperf":
        load = {"kind": "iperf", "count": flows, "mss_bytes": mss}
    else:
        load = {"kind": "netperfmeter", "count": flows}
        if mss < 1448:
            params["advmss_bytes"] = mss
    traffic = [{**load, "name": "up", "src": "h1", "dst": "h2"},
               {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
                "interval_s": 0.1}]
    if dirs == "both":
        traffic.append({**load, "name": "down", "src": "h1", "dst": "h2",
                        "direction": "down",
                        "count": flows if tool == "iperf" else 1})
    return Scenario(name="envelope", description="envelope benchmark point",
                    params=params,
                    traffic=tuple(traffic), duration_s=30, quick_duration_s=15,
                    tcp_sample_ms=tcp_ms)


def _floats(text):
    return [float(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="10,20")
    ap.add_argument("--flows", default="1,5,40")
    ap.add_argument("--mss", default="1448,536")
    ap.add_argument("--dirs", default="up")
    ap.add_argument("--tool", default="iperf", help="comma list of iperf, netperfmeter")
    ap.add_argument("--time", type=float, default=15)
    ap.add_argument("--tcp-ms", type=float, default=10)
    ap.add_argument("--rt", default="0")
    ap.add_argument("--delay-ms", type=float, default=10, help="one-way delay per link")
    ap.add_argument("--switch", default="auto", help="auto, ovs or bridge")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    if not set(args.tool.split(",")) <= {"iperf", "netperfmeter"}:
        ap.error(f"--tool {args.tool!r}: a comma list of iperf, netperfmeter")
    os.environ[SAMPLER_RT_ENV] = args.rt
    os.environ["BUFFERBLOAT_MAX_MBIT"] = "0"   # the point is to see the real rate
    out = tempfile.mkdtemp(prefix="bb-envelope-")
    where = "VM" if os.path.exists("/etc/bufferbloat-vm") else "host"
    print(f"# envelope on the {where} ({os.environ.get('BUFFERBLOAT_GUEST_ACCEL', '-')}), "
          f"{args.time:g} s per point, sockets every {args.tcp_ms:g} ms, sampler "
          f"SCHED_FIFO {args.rt}, switch {args.switch}")
    cols = ("tool", "rate", "flows", "mss", "dirs", "wc_fwd", "wc_rev", "missed", "smp_cpu",
            "late_s", "idle_p50", "goodput", "verdict", "wall_s")
    print(" | ".join(cols), flush=True)
    rows = []
    grid = itertools.product(_floats(args.rates), [int(x) for x in _floats(args.flows)],
                             [int(x) for x in _floats(args.mss)], args.dirs.split(","),
                             args.tool.split(","))
    for rate, flows, mss, dirs, tool in grid:
        t = time.monotonic()
        try:
            run = load_run(run_point(scenario(rate, flows, mss, dirs, args.tcp_ms, args.delay_ms,
                                              args.switch, tool), {},
                                     duration_s=args.time, out_root=out, log=lambda *_: None))
        except Exception as exc:  # noqa: BLE001 - a benchmark prints what happened
            print(f"{tool} | {rate:g} | {flows} | {mss} | {dirs} | failed: {exc}", flush=True)
            continue
        h = run.record.get("health") or {}
        c = h.get("checks", {})
        wc = [v for k, v in c.items() if k.startswith("work_conservation")]
        smp = c.get("sampler_missed_ticks", {})
        good = sum(v.get("goodput_mbit", 0) for k, v in c.items()
                   if k.startswith("goodput_possible"))
        row = dict(tool=tool, rate=rate, flows=flows, mss=mss, dirs=dirs,
                   wc_fwd=wc[0]["value"] if wc else None,
                   wc_rev=wc[1]["value"] if len(wc) > 1 else None,
                   missed=smp.get("value"), smp_cpu=smp.get("cpu_share"),
                   late_s=c.get("flows_on_time", {}).get("value"),
                   idle_p50=c.get("idle_rtt", {}).get("value"), goodput=round(good, 2),
                   verdict=h.get("verdict"), wall_s=round(time.monotonic() - t, 1))
        rows.append(row)
        print(" | ".join(str(row[k]) for k in cols), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
