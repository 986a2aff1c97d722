"""Host kernel: the netlink sampler against a 100-packet FIFO at 1.5 Mbit/s.

One network, one sampler (10 ms) for the whole test, two phases:

1. one cubic iperf3 flow (port 5201) for 25 s with a ping every 0.1 s: the sampled
   backlog of the FIFO leaf reaches its limit (>= 90 of 100 packets); the flow's sampled
   srtt is plausible next to the ping RTT measured at the same time: the median srtt over
   the second half of the flow is within 25 % of the median ping RTT over the same span
   (srtt is an EWMA with gain 1/8 and the queue saw-tooths between ~0 and ~750 ms, so
   the two sample the same queue but not at the same instants); every srtt is below the
   largest RTT the full FIFO allows (807 ms) plus 20 %;
2. iperf3 -P 3 (port 5202) for 8 s: three data flows in tcp.csv, the control connection
   left out.

And the sampler's own timing: the achieved period p99 <= 11 ms at 10 ms, a host timing
band judged by the sequential rule (tests/retries.py), each attempt on a fresh network.
"""
import csv
import os
import pathlib
import statistics
import tempfile
import time

import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.measure.sampler import Sampler
from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo
from bufferbloat.traffic.iperf.flow import Iperf3Flow
from bufferbloat.traffic.ping import PingProbe
from tests.retries import band, measure_until_met
from tests.timing import sampler_timing_misses

FLOW_S = 25


def _read(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def _sample_fifo(base):
    """One attempt: the single flow with its pings, then the three parallel flows, all
    under one 10 ms sampler. Returns what the checks read."""
    out = pathlib.Path(tempfile.mkdtemp(prefix="attempt-", dir=base))
    topo = DumbbellTopo(bottleneck_mbit=1.5, qdisc="fifo", buffer_pkts=100, cca="cubic",
                        switch="bridge")
    with Network(topo) as net:
        t0 = time.monotonic()
        rt_minus_mono = time.time() - time.monotonic()
        sampler = Sampler(net, str(out), t0, period_s=0.01,
                          flows=[{"host": "h1", "dports": [5201, 5202]}]).start()
        ping = PingProbe(net, "h1", "h2", interval_s=0.1).start()
        flow = Iperf3Flow(net, "h1", "h2", FLOW_S, cca="cubic", port=5201).start()
        t_flow = time.monotonic() - t0
        flow.wait()
        pings = ping.stop()
        par = Iperf3Flow(net, "h1", "h2", 8, cca="cubic", port=5202, parallel=3).start()
        par.wait()
        assert sampler.alive()
        stats = sampler.stop()
        bn_dev = net.bottleneck_dev[1]
    return {"dir": out, "t0": t0, "rt_minus_mono": rt_minus_mono, "t_flow": t_flow,
            "pings": pings, "stats": stats, "bn_dev": bn_dev}


@pytest.mark.acceptance
def test_sampler_fifo_backlog_srtt_and_parallel_flows(net_guard, tmp_path):
    # the sampler's own timing is a host timing band (a loaded 2-core machine misses it
    # now and then, 2026-11-30: load 1.1-1.3): judged by the sequential rule, each
    # attempt a fresh network; the physics below is read from the attempt that decided
    got, _ = measure_until_met(lambda: _sample_fifo(tmp_path),
                               lambda got: sampler_timing_misses(got["stats"], p99_ms=11.0),
                               "sampler timing at 10 ms")
    stats, pings, bn_dev = got["stats"], got["pings"], got["bn_dev"]
    t0, rt_minus_mono, t_flow = got["t0"], got["rt_minus_mono"], got["t_flow"]
    series = got["dir"] / "series"
    qhead, qrows = _read(series / "qdisc.csv")
    thead, trows = _read(series / "tcp.csv")
    assert tuple(qhead) == SERIES_COLUMNS["qdisc"] and tuple(thead) == SERIES_COLUMNS["tcp"]
    print("sampler stats:", stats)

    # 1. the FIFO leaf's backlog reaches the limit
    leaf = [r for r in qrows if r["dev"] == bn_dev and r["parent"] == "1:1"]
    root = [r for r in qrows if r["dev"] == bn_dev and r["parent"] == "root"]
    assert leaf and leaf[0]["kind"] == "pfifo" and root[0]["kind"] == "htb"
    assert len(leaf) == len(root)  # one row per qdisc per tick
    peak = max(int(r["qlen_pkts"]) for r in leaf)
    print(f"leaf backlog peak {peak} pkts, "
          f"{max(int(r['backlog_bytes']) for r in leaf)} bytes")
    band("FIFO leaf backlog peak", peak, lo=90, unit="packets")
    assert int(leaf[-1]["drops"]) > 0

    # srtt of the single flow against ping over the second half of the flow
    single = [r for r in trows if r["dport"] == "5201"]
    assert len({r["flow"] for r in single}) == 1, "control connection not left out"
    lo, hi = t_flow + FLOW_S / 2, t_flow + FLOW_S
    srtt_ms = [int(r["srtt_us"]) / 1e3 for r in single if lo <= float(r["t"]) <= hi]
    ping_ms = [rtt for ts, _seq, rtt in pings.probes
               if lo <= ts - rt_minus_mono - t0 <= hi]
    band("srtt samples, second half", len(srtt_ms), lo=0.8 * (hi - lo) / 0.01)
    band("ping RTTs, second half", len(ping_ms), lo=51)
    assert len(srtt_ms) > 0.8 * (hi - lo) / 0.01
    med_s, med_p = statistics.median(srtt_ms), statistics.median(ping_ms)
    print(f"second half: median srtt {med_s:.1f} ms (n={len(srtt_ms)}), median ping "
          f"{med_p:.1f} ms (n={len(ping_ms)}), max srtt {max(srtt_ms):.1f} ms")
    band("srtt median over ping RTT median, second half", med_s / max(med_p, 1e-9),
         0.75, 1.25)
    band("srtt, maximum", max(int(r["srtt_us"]) for r in single) / 1e3, hi=807 * 1.2,
         unit="ms")
    assert all(r["cca"] == "cubic" and int(r["cwnd_pkts"]) > 0 for r in single)

    # 2. three parallel flows: three cwnd series
    par_flows = {}
    for r in trows:
        if r["dport"] == "5202":
            par_flows.setdefault(r["flow"], []).append(int(r["cwnd_pkts"]))
    print("parallel flows:", {k: len(v) for k, v in par_flows.items()})
    assert len(par_flows) == 3
    # most of 8 s at 10 ms
    band("samples of the parallel flow with fewest", min(len(v) for v in par_flows.values()),
         lo=301)
    assert stats["control_sockets_ignored"] == 2  # one per iperf3 run

    # the ticks' order
    ts = [float(r["t"]) for r in root]
    assert all(b > a for a, b in zip(ts, ts[1:]))
    assert os.path.getsize(series / "sampler.json") > 0


def test_download_sampled_at_its_server(net_guard, tmp_path):
    """A download (iperf3 -R: the server on h2 sends) is sampled from the server's
    namespace by its source port, as the RRUL load's downloads are. iperf3's server
    listens on a dual-stack IPv6 socket, so its data socket is AF_INET6 with an
    IPv4-mapped peer: the sampler must read that family too. Its bytes_acked lies
    between what iperf3's receiver read and what its sender wrote, grows at the link's
    goodput, and its addresses read as the IPv4 ones they are."""
    topo = DumbbellTopo(bottleneck_mbit=10, qdisc="fifo", buffer_pkts=100, cca="cubic",
                        switch="bridge")
    with Network(topo) as net:
        t0 = time.monotonic()
        flow = Iperf3Flow(net, "h1", "h2", 4, cca="cubic", port=5221, direction="down",
                          name="down")
        sampler = Sampler(net, str(tmp_path), t0, period_s=0.01,
                          flows=[{"host": "h2", "sports": [5221],
                                  "labels": {5221: "down"}}]).start()
        flow.start()
        flow.wait()
        time.sleep(0.1)
        stats = sampler.stop()
        ip1, ip2 = net.ip("h1"), net.ip("h2")
    _, trows = _read(tmp_path / "series" / "tcp.csv")
    rows = [r for r in trows if r["flow"] == "down"]
    assert len(rows) > 0.8 * 4 / 0.01, (len(rows), stats)
    assert {(r["host"], r["src"], r["sport"], r["dst"]) for r in rows} == {
        ("h2", ip2, "5221", ip1)}
    acked = max(int(r["bytes_acked"]) for r in rows)
    sent = flow.server_result["end"]["sum_sent"]["bytes"]
    received = flow.result["end"]["sum_received"]["bytes"]
    print(f"bytes acked {acked}, sent by the server {sent}, received by iperf3 {received}")
    # what the receiving application read <= what its kernel acknowledged <= what the
    # sender wrote into its socket
    assert received <= acked <= sent, (acked, sent, received)
    # and the acknowledged rate is the link's goodput: 10 Mbit/s x 1448/1514 (headers),
    # over the middle of the flow, within 5 %
    ts = [float(r["t"]) for r in rows]
    mid = [(float(r["t"]), int(r["bytes_acked"])) for r in rows
           if ts[0] + 1 <= float(r["t"]) <= ts[0] + 3]
    mbit = (mid[-1][1] - mid[0][1]) * 8 / (mid[-1][0] - mid[0][0]) / 1e6
    assert abs(mbit - 10 * 1448 / 1514) <= 0.05 * 10 * 1448 / 1514, mbit
    assert stats["flow_sockets"] == 1 and stats["control_sockets_ignored"] == 1
