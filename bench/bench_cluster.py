"""Benchmark of a sweep on Dask workers against the same sweep run serially (not a test).

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_cluster.py [--points 8] [--time 5]
                                                             [--workers 2]

Runs one host-kernel sweep (``a1_fifo``, FIFO sizes, ``--set delay_ms=0``: HTB and
pfifo only, which every Linux kernel has) of ``--points`` points twice, into two fresh
results trees: serially (``bufferbloat sweep ... --host``), then on a local cluster of
``--workers`` workers (``--workers N``), and counts what either left behind (links and
network namespaces' state in the initial namespace, bufferbloat state files, tool
processes). Its last line:

    serial S s, 2 workers W s, ratio W/S, points ok N/N, leftovers K

Expected on a 2-core machine: ratio <= 0.6, N/N, K = 0. Asserts nothing.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (20, 30, 40, 50, 60, 70, 80, 90, 100, 120, 140, 160)


def links():
    return set(os.listdir("/sys/class/net"))


def tool_pids():
    out = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm in ("iperf3", "ping", "irtt", "netperfmeter", "bb-qdisc-sample",
                    "mnexec", "unshare"):
            out.add(pid)
    return out


def state_files():
    return set(glob.glob("/run/bufferbloat/netns-*/network.json")
               + glob.glob("/run/bufferbloat-network.json")
               + glob.glob("/var/tmp/bufferbloat-workers/*/network.json")
               + glob.glob("/var/tmp/bufferbloat-workers/*/child.json"))


def sweep(out, points, time_s, extra):
    sizes = ",".join(str(s) for s in SIZES[:points])
    argv = [sys.executable, "-m", "bufferbloat", "sweep", "a1_fifo", "--vary",
            f"buffer_pkts={sizes}", "--set", "delay_ms=0", "--time", str(time_s),
            "--repeat", "1", "--host", "--no-figures", "--out", str(out)] + extra
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    index_path = Path(out) / "a1_fifo" / "sweep" / "index.json"
    entries = json.loads(index_path.read_text())["done"] if index_path.exists() else []
    ok = sum(1 for e in entries if e.get("status") == "ok")
    healthy = sum(1 for e in entries if e.get("health") == "healthy")
    workers = sorted({e.get("worker", "here") for e in entries})
    return wall, ok, healthy, workers, proc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=8, help="sweep points (8 to 12)")
    ap.add_argument("--time", type=float, default=5.0, help="seconds of traffic per point")
    ap.add_argument("--workers", type=int, default=2, help="local workers")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_cluster: needs root (it builds networks)")
    before = (links(), tool_pids(), state_files())
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        for name, extra in (("serial", []), ("cluster", ["--workers", str(args.workers)])):
            wall, ok, healthy, workers, proc = sweep(Path(tmp) / name, args.points,
                                                     args.time, extra)
            results[name] = (wall, ok)
            print(f"{name:8s} wall {wall:7.1f} s  ok {ok}/{args.points}  healthy "
                  f"{healthy}  exit {proc.returncode}  ran on: {', '.join(workers)}",
                  flush=True)
            if proc.returncode not in (0, 5):
                print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
    time.sleep(1.0)
    after = (links(), tool_pids(), state_files())
    left = sum(len(b - a) for a, b in zip(before, after))
    if left:
        print("left behind:", [sorted(b - a) for a, b in zip(before, after)])
    s, w = results["serial"][0], results["cluster"][0]
    ok = min(results["serial"][1], results["cluster"][1])
    print(f"serial {s:.1f} s, {args.workers} workers {w:.1f} s, ratio {w / s:.2f}, "
          f"points ok {ok}/{args.points}, leftovers {left}")


if __name__ == "__main__":
    main()
