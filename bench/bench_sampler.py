"""Benchmark of the netlink sampler (not a test): achieved period and CPU share.

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_sampler.py [--time 10]
    vm/run -- python3 bench/bench_sampler.py --time 10

One dumbbell (10 Mbit/s FIFO); h1 opens TCP connections to h2 that each send 128 KiB
(so they pass the sampler's 64 KiB data-flow rule) and then stay open, idle: 1 to port
6001, 9 to 6002, 70 to 6003, plus 80 "other" connections to port 7000 that the filter
must leave out. Sampling 1, 10 or 80 flows = dports {6001}, {6001, 6002}, {6001..6003}.
Idle connections instead of iperf3 -P N: the sampler's cost per socket is one tcp_info
in the dump and one CSV row, whatever the socket carries, and 80 iperf3 streams would
load the 2-core machine (and the TCG VM) far more than the sampler does.

For each period (10 ms, 1 ms) and flow count the sampler process runs ``--time``
seconds; printed: achieved period p50/p99/max, missed ticks, CPU share of one core
(process CPU time / wall time of the sampling loop), rows written. Then the cost per call
of one inet_diag dump with the bytecode filter against a full dump filtered in Python.

Last, the queue part alone (``--queue-only``: only this): the bottleneck's qdiscs sampled
at 10 ms for ``--time`` seconds by the compiled helper (bb-qdisc-sampler) and by the
Python loop (BUFFERBLOAT_QDISC_SAMPLER=c / python, no flows): CPU per tick of the process
that reads the queue, and the ratio; then the helper alone ticking without reading
(``--idle``): what the wake-up itself costs, the floor of any 10 ms sampler.
"""

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bufferbloat.core.signals import stop_process  # noqa: E402
from bufferbloat.measure.compiled import QDISC_SAMPLER_ENV, qdisc_helper_binary  # noqa: E402
from bufferbloat.measure.sampler import Sampler  # noqa: E402
from bufferbloat.net.network import Network  # noqa: E402
from bufferbloat.net.topology import DumbbellTopo  # noqa: E402
from bufferbloat.netlink import nlstats  # noqa: E402

GROUPS = ((6001, 1), (6002, 9), (6003, 70))
OTHER = (7000, 80)

SERVER = r"""
import selectors, socket, sys
sel = selectors.DefaultSelector()
for p in map(int, sys.argv[1:]):
    s = socket.create_server(("0.0.0.0", p), backlog=256)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, "listen")
while True:
    for key, _ in sel.select():
        if key.data == "listen":
            c, _ = key.fileobj.accept()
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ, "conn")
        else:
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
"""

CLIENT = r"""
import socket, sys, time
dst = sys.argv[1]
conns = []
for spec in sys.argv[2:]:
    port, n = map(int, spec.split("x"))
    for _ in range(n):
        c = socket.create_connection((dst, port))
        c.sendall(b"x" * 131072)
        conns.append(c)
print(len(conns), flush=True)
time.sleep(3600)
"""


def row(*cols):
    print(" | ".join(str(c) for c in cols), flush=True)


def _count_rows(path):
    with open(path) as f:
        return sum(1 for _ in csv.reader(f)) - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=float, default=10.0, help="seconds per measurement")
    ap.add_argument("--periods", default="10,1", help="sampling periods, ms")
    ap.add_argument("--flows", default="1,10,80", help="flow counts (1, 10, 80)")
    ap.add_argument("--queue-only", action="store_true",
                    help="only the queue sampler: C helper against Python, per tick")
    args = ap.parse_args()
    where = "VM" if os.path.exists("/etc/bufferbloat-vm") else "host"
    print(f"# sampler benchmark on the {where}: kernel {platform.release()}, "
          f"{os.cpu_count()} CPUs, {args.time:g} s per row")
    topo = DumbbellTopo(bottleneck_mbit=10, buffer_pkts=100,
                        switch="bridge" if where == "host" else "auto")
    with Network(topo) as net, tempfile.TemporaryDirectory() as tmp:
        if args.queue_only:
            bench_queue(net, tmp, args.time)
            return
        ports = [p for p, _ in GROUPS] + [OTHER[0]]
        server = net.popen("h2", [sys.executable, "-c", SERVER] + ports)
        time.sleep(1.0)
        client = net.popen("h1", [sys.executable, "-c", CLIENT, net.ip("h2")]
                           + [f"{p}x{n}" for p, n in GROUPS + (OTHER,)])
        opened = client.stdout.readline().strip()
        time.sleep(2.0)  # the 128 KiB of every connection acked
        print(f"# {opened} TCP connections open (h1 -> h2)")
        row("period", "flows", "p50 ms", "p99 ms", "max ms", "missed", "CPU % of a core",
            "tcp rows", "qdisc rows")
        for period_ms in [float(p) for p in args.periods.split(",")]:
            for n in [int(x) for x in args.flows.split(",")]:
                dports = [p for p, _ in GROUPS][:{1: 1, 10: 2, 80: 3}[n]]
                out = os.path.join(tmp, f"p{period_ms:g}-n{n}")
                s = Sampler(net, out, time.monotonic(), period_s=period_ms / 1e3,
                            flows=[{"host": "h1", "dports": dports}]).start()
                time.sleep(args.time)
                st = s.stop()
                tcp_rows = _count_rows(os.path.join(out, "series", "tcp.csv"))
                q_rows = _count_rows(os.path.join(out, "series", "qdisc.csv"))
                row(f"{period_ms:g} ms", n, st["period_p50_ms"], st["period_p99_ms"],
                    st["period_max_ms"], st["missed_ticks"], f"{100 * st['cpu_share']:.1f}",
                    tcp_rows, q_rows)
                assert st["flow_sockets"] == n, st
        # the port filter: in the kernel (bytecode) or here
        pid = net.net["h1"].pid
        print("# inet_diag dump of h1 (160 connections), 80 wanted: cost per call")
        row("filter", "sockets returned", "us per call (read + parse)")
        for flt in ("bytecode", "python"):
            r = nlstats.TcpReader(pid, dports=[p for p, _ in GROUPS], filter=flt)
            n_calls = 2000
            r.read()
            t = time.perf_counter()
            for _ in range(n_calls):
                got = r.read()
            us = (time.perf_counter() - t) / n_calls * 1e6
            row(flt, len(got), f"{us:.0f}")
            r.close()
        qr = nlstats.QdiscReader(net.bottleneck_dev[1])
        t = time.perf_counter()
        for _ in range(2000):
            qr.read()
        row("RTM_GETQDISC (htb + pfifo)", 2, f"{(time.perf_counter() - t) / 2000 * 1e6:.0f}")
        stop_process(client)
        stop_process(server)
        bench_queue(net, tmp, args.time)


def bench_queue(net, tmp, seconds):
    """The bottleneck's qdiscs at 10 ms, by the C helper and by Python: CPU per tick."""
    print(f"# queue sampler alone (bottleneck {net.bottleneck_dev[1]}, 10 ms, no flows): "
          f"CPU of the process that reads the queue")
    row("queue sampler", "ticks", "missed", "p99 ms", "CPU % of a core", "us CPU per tick")
    per_tick = {}
    saved = os.environ.get(QDISC_SAMPLER_ENV)
    try:
        for mode in ("c", "python"):
            os.environ[QDISC_SAMPLER_ENV] = mode
            s = Sampler(net, os.path.join(tmp, f"queue-{mode}"), time.monotonic(),
                        period_s=0.01, flows=[]).start()
            time.sleep(seconds)
            st = s.stop()
            cpu = st["qdisc_cpu_s"] if mode == "c" else st["cpu_s"]
            wall = st["t_last"] - st["t_first"]
            per_tick[mode] = cpu / st["samples"] * 1e6
            row(st["qdisc_sampler"], st["samples"], st["missed_ticks"], st["period_p99_ms"],
                f"{100 * cpu / wall:.2f}", f"{per_tick[mode]:.0f}")
    finally:
        if saved is None:
            os.environ.pop(QDISC_SAMPLER_ENV, None)
        else:
            os.environ[QDISC_SAMPLER_ENV] = saved
    print(f"# C per tick = {per_tick['c'] / per_tick['python']:.2f} x Python's "
          f"(Python = {per_tick['python'] / per_tick['c']:.1f} x C)")
    binary, _why = qdisc_helper_binary()
    stats = os.path.join(tmp, "idle.json")
    subprocess.run([binary, "--t0", repr(time.monotonic()), "--period", "0.01", "--duration",
                    str(seconds), "--idle", "--out", os.path.join(tmp, "idle.csv"), "--stats",
                    stats, net.bottleneck_dev[1]], check=True, stdout=subprocess.DEVNULL)
    with open(stats) as f:
        idle = json.load(f)
    row("c --idle (wake-up only)", idle["samples"], idle["missed_ticks"],
        idle["period_p99_ms"], f"{100 * idle['cpu_share']:.2f}",
        f"{idle['cpu_per_tick_us']:.0f}")


if __name__ == "__main__":
    main()
