"""Full kernel (the project VM): netem delay and loss, PIE against FIFO, every qdisc.

Tolerances, from the issue and docs/design/platform.md:
* idle ping RTT over a dumbbell with 5 ms one-way per link = 4 x 5 = 20 ms, within 1 ms,
  once the emulator's own RTT is taken out: the same dumbbell without delay, measured
  alike (under TCG, forwarding through namespaces and OVS costs 0.5-1 ms per round trip,
  which is not netem's doing and would be there on any path);
* 2 % random loss on one direction of one link: 2500 pings (4 ms apart, 10 s), of which
  0.88-3.12 % lost: the binomial sd is 0.28 %, so the band is +/- 4 sd (a healthy run
  falls outside it once in ~16,000; the earlier 1-3 % of 1000 pings was +/- 2.3 sd and
  failed CI once, at 3.1 %), and a loss that is off (0 %), given as a fraction
  (0.02 %) or doubled (both directions, ~4 %) falls outside it;
* PIE target 20 ms at 1.5 Mbit/s, one cubic flow: median queueing delay reported by PIE
  from half the target to 1.5x, 10-30 ms (measured 12.3-19.5 ms); FIFO-100 on
  the same network: median queueing delay (backlog / rate) from 500 ms to a full queue's
  807 ms plus one packet (measured 540-681 ms);
* the backlog sits in the AQM leaf: the netem delay line (before it, 10 ms at the
  sender's 1.5 Mbit/s ACK clock: ~1.2 packets) holds at most a few packets.
"""
import math
import os
import re
import statistics

import pytest

from bufferbloat.net.network import Network
from bufferbloat.net.qdiscs import KINDS
from bufferbloat.net.topology import DumbbellTopo
from tests.recipes import idle_ping, idle_rtt, long_flow
from tests.retries import band

FLOW_S = 25
LOSS_PROBES = 2500
WARMUP_S = 5


def test_guest_has_every_feature():
    from bufferbloat.net.capabilities import probe
    caps = probe()
    caps.require(["sch_pie", "sch_netem", "sch_red", "sch_codel", "sch_fq_codel",
                  "openvswitch", "vegas", "bbr", "cubic", "ifb", "iperf3", "mininet"])


def _idle_rtt_ms(**params):
    med, res, switch = idle_rtt(**params)
    assert switch == "ovs"
    return med, res


@pytest.mark.acceptance
def test_netem_delay_gives_the_base_rtt(net_guard):
    own, _ = _idle_rtt_ms(delay_ms=0)
    med, res = _idle_rtt_ms(delay_ms=5)
    added = med - own
    print(f"base RTT: configured 20 ms; measured median {med:.2f} ms (min {min(res.rtts):.2f},"
          f" max {max(res.rtts):.2f}); the emulator's own RTT {own:.2f} ms; netem added "
          f"{added:.2f} ms")
    # never less than configured; above it by each of the 4 netem stages' timer wake-up
    # under TCG (~0.3 ms each, docs/design/health.md): 0.4-1.05 ms measured over the CI runs
    band("netem's added RTT - 20 ms", added - 20, -0.5, 1.5, "ms")
    # the emulator's own share stays small next to the delays we emulate
    band("emulator's own RTT", own, hi=2.0, unit="ms")


@pytest.mark.acceptance
def test_loss_on_one_link_direction(net_guard):
    topo = DumbbellTopo(bottleneck_mbit=10, loss_pct=2, loss_link="access",
                        loss_dir="forward")
    with Network(topo) as net:
        res = idle_ping(net, LOSS_PROBES, 0.004)
    print(f"loss 2 %: {res.sent} probes, {res.loss_pct:.2f} % lost")
    assert res.sent == LOSS_PROBES
    sd = 100 * math.sqrt(0.02 * 0.98 / LOSS_PROBES)
    band("probe loss", res.loss_pct, 2.0 - 4 * sd, 2.0 + 4 * sd, "%")


def _pie_delay_ms(q):
    """PIE's own queueing delay estimate from tc's JSON xstats, ms."""
    value = q.get("delay", q.get("xstats", {}).get("delay"))
    assert value is not None, f"no PIE delay in {sorted(q)}"
    return _time_ms(value)


def _time_ms(value):
    if isinstance(value, (int, float)):
        return value / 1000.0  # tc reports PIE's delay in microseconds
    v = str(value)
    for unit, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * scale
    raise AssertionError(f"unparsed time {value!r}")


@pytest.mark.acceptance
def test_pie_holds_its_target_where_fifo_bloats(net_guard):
    wire = ("h1", "h1-eth0")  # the sender's path delay stage (netem leaf of its shaper)
    # the same dumbbell, one network each
    with Network(DumbbellTopo(bottleneck_mbit=1.5, delay_ms=5, qdisc="pie", buffer_pkts=1000,
                              qdisc_params={"target_ms": 20})) as net:
        pie = long_flow(net, FLOW_S, extra_polls=[wire])
    with Network(DumbbellTopo(bottleneck_mbit=1.5, delay_ms=5, qdisc="fifo",
                              buffer_pkts=100)) as net:
        fifo = long_flow(net, FLOW_S, extra_polls=[wire])
    pie_leaf = pie.after(WARMUP_S)
    assert pie_leaf and all(q["kind"] == "pie" for q in pie_leaf)
    pie_delay = statistics.median(_pie_delay_ms(q) for q in pie_leaf)
    fifo_leaf = fifo.after(WARMUP_S)
    assert fifo_leaf and all(q["kind"] == "pfifo" for q in fifo_leaf)
    fifo_delay = statistics.median(q["backlog"] * 8 / 1.5e6 * 1e3 for q in fifo_leaf)
    wire_max = max(q["qlen"] for res in (pie, fifo) for t, qs in res.others[wire]
                   for q in qs if q["kind"] == "netem"
                   and t - res.leaf_samples[0][0] >= WARMUP_S)
    print(f"PIE median queueing delay {pie_delay:.1f} ms (target 20), ping median "
          f"{pie.median_rtt_ms(WARMUP_S):.1f} ms, goodput {pie.goodput_mbit:.3f}; "
          f"FIFO-100 median queueing delay {fifo_delay:.0f} ms, max RTT "
          f"{fifo.max_rtt_ms():.0f} ms, goodput {fifo.goodput_mbit:.3f}; "
          f"the delay stage held at most {wire_max} packets")
    band("PIE delay p50", pie_delay, 10, 30, "ms")
    band("FIFO-100 queueing delay p50", fifo_delay, 500, 807 + 8.1, "ms")
    band("FIFO-100 max queue length", max(q["qlen"] for q in fifo_leaf), lo=90, unit="pkts")
    band("delay stage max queue length", wire_max, hi=10, unit="pkts")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_qdisc_installs_and_reads_back(kind, net_guard):
    topo = DumbbellTopo(bottleneck_mbit=5, delay_ms=2, qdisc=kind)
    with Network(topo) as net:
        leaf = net.bottleneck_tree()["leaf"]
        assert leaf["kind"] == topo.qdisc.tc_kind and leaf["parent"] == "1:1"
        out = net.run("h1", ["ping", "-c", "3", "-i", "0.2", net.ip("h2")])
        assert " 0% packet loss" in out
        burst = _htb_burst_read_back(net)
    # the shaper's burst, as the kernel holds it: under TCG 20 ms of the 5 Mbit/s rate
    # (bottleneck.HTB_BURST_MS, docs/design/health.md), 12,500 B; HTB keeps it as a time in
    # ticks, so tc's conversion back may round by a few bytes. A KVM guest's timers are
    # on time: tc's default of about one MTU.
    if os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg":
        assert burst == pytest.approx(5e6 / 8 * 0.020, rel=0.01), burst
    else:
        assert burst <= 2000, burst


def _htb_burst_read_back(net):
    """The bottleneck's HTB class burst in bytes, from the kernel (``tc -d class show``,
    the record's readback: iproute2 6.1 has no JSON for HTB classes)."""
    ns, dev = net.bottleneck_dev
    text = next(v["classes"] for k, v in net.readback().items() if k.endswith("/" + dev))
    m = re.search(r" burst (\d+(?:\.\d+)?)(b|Kb|Mb)\b", text)
    assert m, text
    return float(m.group(1)) * {"b": 1, "Kb": 1024, "Mb": 1024 * 1024}[m.group(2)]
