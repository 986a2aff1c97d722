"""Benchmark of a network's build, read-back and teardown by step (not a test).

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_build.py [--k 1,5,10,20] [--repeat 2]
    vm/run -- /usr/bin/python3 /bb/bench/bench_build.py        # in the project VM

Builds family E's network (``e1_aqm_kflows``: k sender hosts, one link each, FIFO at
the bottleneck) at each k, without traffic, and prints where its seconds go: Mininet's
own build and start, the offloads (ethtool per interface), the qdisc plan, the hosts'
settings (sysctl), the read-back the run records (qdiscs, sysctls, routes) and the
teardown, with the tool processes each step ran and its calls made in this process inside
a host's namespace (offloads and sysctls: bufferbloat/netlink/nsconfig.py). E's build grows with k (30 s at
k = 20 in the TCG VM, docs/design/cost.md); this shows which step. Asserts nothing.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STEPS = ("_build_mininet", "offloads_off", "_run_plan", "_configure_host", "readback",
         "sysctls", "_stop")


def timed_network(topo, caps):
    """A Network whose STEPS add their seconds and tool processes to ``spent``."""
    from bufferbloat.net.network import Network  # noqa: PLC0415 - needs Mininet

    net = Network(topo, caps=caps)
    spent = {s: [0.0, 0, 0] for s in STEPS}

    def wrap(name):
        inner = getattr(net, name)

        def timed(*a, **kw):
            t, c, n = time.monotonic(), net.tool_calls, net.ns_calls
            try:
                return inner(*a, **kw)
            finally:
                spent[name][0] += time.monotonic() - t
                spent[name][1] += net.tool_calls - c
                spent[name][2] += net.ns_calls - n
        return timed

    for name in STEPS:
        setattr(net, name, wrap(name))
    return net, spent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="1,5,10,20", help="sender counts (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=2, help="builds per k (default 2)")
    args = ap.parse_args(argv)
    from bufferbloat.net.capabilities import probe  # noqa: PLC0415
    from bufferbloat.net.scaling import rate_cap_mbit  # noqa: PLC0415
    from bufferbloat.scenarios import catalogue  # noqa: PLC0415

    scn = catalogue()["e1_aqm_kflows"]
    caps = probe()
    print(f"{'k':>3} {'total':>6} " + " ".join(f"{s.strip('_')[:15]:>15}" for s in STEPS)
          + "  (s [tool processes|calls inside a namespace in this process])")
    for k in (int(x) for x in args.k.split(",")):
        for _ in range(args.repeat):
            topo, _, _ = scn.build({"k": k, "variant": "fifo"}, quick=True, hz=caps.hz,
                                   max_rate_mbit=rate_cap_mbit(scn))
            net, spent = timed_network(topo, caps)
            t0 = time.monotonic()
            with net:
                net.describe()
                net.sysctls()
            total = time.monotonic() - t0
            print(f"{k:>3} {total:6.1f} " + " ".join(
                f"{spent[s][0]:6.2f} [{spent[s][1]:>3}|{spent[s][2]:>3}]" for s in STEPS),
                flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
