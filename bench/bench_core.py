"""Benchmark of the emulation core (not a test): prints measured against configured.

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_core.py [--rates 1.5,10] [--time 15]

Rows: configured vs achieved TCP goodput; theoretical vs measured full-queue RTT of a
100-packet FIFO; configured vs measured base RTT (netem delay) and loss; time to build
and tear down a dumbbell. Where the kernel lacks something (netem on the host), the row
says so instead of a number. bench/run.sh runs it on the host and in the project VM.
"""

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bufferbloat.net.capabilities import probe  # noqa: E402
from bufferbloat.net.network import Network  # noqa: E402
from bufferbloat.net.topology import DumbbellTopo  # noqa: E402
from bufferbloat.results.theory import full_queue_rtt_ms, tcp_goodput_ceiling  # noqa: E402
from tests.recipes import idle_ping, long_flow  # noqa: E402


def row(*cols):
    print(" | ".join(str(c) for c in cols), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1.5,10", help="bottleneck rates, Mbit/s")
    ap.add_argument("--time", type=float, default=15, help="seconds per flow")
    ap.add_argument("--builds", type=int, default=5)
    args = ap.parse_args()
    caps = probe()
    where = "VM" if os.path.exists("/etc/bufferbloat-vm") else "host"
    print(f"# emulation core benchmark on the {where}: kernel {platform.release()}")
    row("measure", "configured / theory", "measured", "ratio")
    for rate in [float(r) for r in args.rates.split(",")]:
        with Network(DumbbellTopo(bottleneck_mbit=rate, buffer_pkts=100)) as net:
            res = long_flow(net, args.time)
        theory = full_queue_rtt_ms(0, 100, rate)
        row(f"goodput @ {rate:g} Mbit/s (FIFO 100)", f"{rate:g} Mbit/s",
            f"{res.goodput_mbit:.3f} Mbit/s", f"{res.goodput_mbit / rate:.3f} "
            f"(TCP ceiling {tcp_goodput_ceiling(rate) / rate:.3f})")
        row(f"full-queue RTT @ {rate:g} Mbit/s", f"{theory:.1f} ms",
            f"{res.max_rtt_ms():.1f} ms (max ping)", f"{res.max_rtt_ms() / theory:.3f}")
    if caps.has("sch_netem"):
        topo = DumbbellTopo(bottleneck_mbit=10, delay_ms=5)
        with Network(topo) as net:
            idle_ping(net, 5, 0.2)
            res = idle_ping(net, 100, 0.05)
        med = statistics.median(res.rtts)
        row("base RTT (5 ms/link)", f"{topo.base_rtt_ms():g} ms", f"{med:.2f} ms (median)",
            f"{med / topo.base_rtt_ms():.3f}")
        with Network(DumbbellTopo(bottleneck_mbit=10, loss_pct=2)) as net:
            res = idle_ping(net, 2000, 0.005)
        row("loss (access, forward)", "2 %", f"{res.loss_pct:.2f} % of {res.sent}",
            f"{res.loss_pct / 2:.3f}")
    else:
        row("base RTT / loss", "-", "not measurable here: " + "; ".join(
            caps.missing(["sch_netem"])), "-")
    builds, teardowns = [], []
    for _ in range(args.builds):
        net = Network(DumbbellTopo(bottleneck_mbit=10))
        t0 = time.monotonic()
        net.start()
        builds.append(time.monotonic() - t0)
        net.stop()
        teardowns.append(net.timings["teardown_s"])
    row(f"build dumbbell ({net.switch_kind})", "-", f"{statistics.median(builds):.2f} s "
        f"(median of {args.builds})", "-")
    row("tear down dumbbell", "-", f"{statistics.median(teardowns):.2f} s", "-")


if __name__ == "__main__":
    main()
