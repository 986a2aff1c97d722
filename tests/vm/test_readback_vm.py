"""Everything configured is read back from the kernel and compared with the configuration
in the project VM, whose kernel has every qdisc.

* every registered qdisc kind (``bufferbloat.net.qdiscs.KINDS``, parametrised from the
  registry: a kind added without expected values here fails): built as the bottleneck's
  leaf with a non-default value for every option it accepts, its options read back
  (``tc -j -d``; the project's PI from the kernel's netlink dump) and each compared with
  the configured value after the kernel's own unit conversion, computed here; with the
  bottleneck's HTB rate, ceil and burst, the hosts' ECN sysctl and a TCP socket's
  congestion control and ECN;
* a study's rate scaled down to this machine's cap (bufferbloat/net/scaling.py): the
  HTB rate/ceil/burst at the scaled rate, a FIFO buffer and RED's thresholds scaled by
  the same factor;
* netem's delay, jitter and loss on each path's delay stage (per-sender RTTs, loss on
  one sender's link both ways, loss on the bottleneck both ways through the IFB), with
  every link direction's HTB class;
* each host's sysctls (tests/readback.py: receive and send buffers, no cached metrics,
  ECN, slow start after idle, its routes' advmss) and each sender's socket's CCA (four
  different ones) and ECN.

How each value is read and what the kernel does to it: tests/readback.py. Nothing here is
skipped: a kernel without a feature fails the build (Network.check names it).
"""
import pytest

from bufferbloat.net.network import Network
from bufferbloat.net.qdiscs import KINDS
from bufferbloat.net.scaling import scale_to_rate
from bufferbloat.net.topology import DumbbellTopo, KDumbbellTopo
from tests import readback as rb

RATE_MBIT = 12.0       # every kind's bottleneck: 1,500,000 B/s
BURST_MS = "7"         # BUFFERBLOAT_HTB_BURST_MS for the kind tests: 10,500 B at 12 Mbit/s

#: {kind: [qdisc_params of one network]}: together, a non-default value for every
#: parameter of the kind (test_cases_cover_every_option). RED's adaptive mode changes
#: max_P as it runs, so its exact probability is read in a network without it.
CASES = {
    "fifo": [dict(limit_pkts=37), dict(limit_bytes=45_000)],
    "pie": [dict(limit_pkts=777, target_ms=25.0, tupdate_ms=20.0, alpha=5, beta=11,
                 ecn=True, bytemode=True, dq_rate_estimator=True)],
    "red": [dict(limit_bytes=120_000, min_bytes=9_000, max_bytes=36_000, probability=0.07,
                 avpkt_bytes=900, burst_pkts=17, ecn=True),
            dict(limit_bytes=110_000, min_bytes=12_000, max_bytes=40_000, probability=0.2,
                 avpkt_bytes=1200, adaptive=True)],
    "codel": [dict(limit_pkts=640, target_ms=7.0, interval_ms=130.0, ecn=True)],
    "fq_codel": [dict(limit_pkts=4321, flows=256, target_ms=8.0, interval_ms=150.0,
                      quantum_bytes=300, ecn=False)],
    "pi": [dict(limit_pkts=321, q_ref_pkts=23, a=0.0021, b=0.0017, freq_hz=200, ecn=True,
                mean_pktsize_bytes=600)],
    "cake": [dict(rtt_ms=60.0, flow_mode="dual-dsthost", diffserv="diffserv4", nat=True,
                  wash=True, ack_filter="ack-filter", split_gso=False,
                  limit_bytes=2_000_000)],
}


def _check_fifo(net, q, p, rate_mbit):
    if p.get("limit_bytes"):
        assert q["kind"] == "bfifo", q
        assert q["options"]["limit"] == p["limit_bytes"], q["options"]
    else:
        assert q["kind"] == "pfifo", q
        assert q["options"]["limit"] == p["limit_pkts"], q["options"]


def _check_pie(net, q, p, rate_mbit):
    o = q["options"]
    assert q["kind"] == "pie", q
    assert o["limit"] == p["limit_pkts"], o
    # target: µs on the wire, psched ticks (64 ns) inside: whole ms survive exactly
    assert o["target"] == round(p["target_ms"] * 1000), ("target µs", o)
    assert o["tupdate"] == rb.jiffies_us(p["tupdate_ms"] * 1000, net.caps.hz), ("tupdate µs", o)
    assert (o["alpha"], o["beta"]) == (p["alpha"], p["beta"]), o
    for flag in ("ecn", "bytemode", "dq_rate_estimator"):
        assert bool(o.get(flag)) is p[flag], (flag, o)


def _check_red(net, q, p, rate_mbit):
    o = q["options"]
    assert q["kind"] == "red", q
    assert (o["limit"], o["min"], o["max"]) == (p["limit_bytes"], p["min_bytes"],
                                                p["max_bytes"]), o
    assert o["ecn"] is p["ecn"] and o["adaptive"] is p["adaptive"], o
    # burst and avpkt reach the kernel only as the EWMA weight (Wlog); the bandwidth
    # (the bottleneck's rate) as the idle damping's cell log
    burst = p["burst_pkts"] or -(-(2 * p["min_bytes"] + p["max_bytes"])
                                 // (3 * p["avpkt_bytes"]))
    wlog = rb.red_wlog(p["min_bytes"], burst, p["avpkt_bytes"])
    assert o["ewma"] == wlog, ("Wlog from burst", burst, "avpkt", p["avpkt_bytes"], o)
    assert o["Scell_log"] == rb.red_scell_log(wlog, p["avpkt_bytes"], rate_mbit * 1e6 / 8), o
    if p["adaptive"]:
        # Adaptive RED lowers max_P by 10 % every 500 ms while the queue is idle, not
        # below 0.01: the configured value is where it started
        assert 0.009 <= o["probability"] <= p["probability"] * (1 + 1e-6), o
    else:
        assert o["probability"] == pytest.approx(p["probability"], rel=1e-6), o


def _check_codel(net, q, p, rate_mbit):
    o = q["options"]
    assert q["kind"] == "codel", q
    assert o["limit"] == p["limit_pkts"], o
    assert o["target"] == rb.codel_us(p["target_ms"] * 1000), ("target µs", o)
    assert o["interval"] == rb.codel_us(p["interval_ms"] * 1000), ("interval µs", o)
    assert bool(o.get("ecn")) is p["ecn"], o


def _check_fq_codel(net, q, p, rate_mbit):
    o = q["options"]
    assert q["kind"] == "fq_codel", q
    assert (o["limit"], o["flows"], o["quantum"]) == (p["limit_pkts"], p["flows"],
                                                      p["quantum_bytes"]), o
    assert o["target"] == rb.codel_us(p["target_ms"] * 1000), ("target µs", o)
    assert o["interval"] == rb.codel_us(p["interval_ms"] * 1000), ("interval µs", o)
    assert bool(o.get("ecn")) is p["ecn"], o


# vm/guest/sch_pi/sch_pi.c: TCA_PI_* attributes of its TCA_OPTIONS, u32 each
PI_LIMIT, PI_QREF, PI_A, PI_B, PI_FREQ, PI_ECN, PI_MEAN_PKTSIZE = range(1, 8)


def _check_pi(net, q, p, rate_mbit):
    assert q["kind"] == "pi", q
    ns, dev = net.bottleneck_dev
    kind, o = rb.raw_qdisc_options(net, ns, dev, "10:")
    assert kind == "pi"
    # gains travel in units of 1e-9 per packet (pi.py, sch_pi.c's a_nano/b_nano)
    assert o == {PI_LIMIT: p["limit_pkts"], PI_QREF: p["q_ref_pkts"],
                 PI_A: round(p["a"] * 1e9), PI_B: round(p["b"] * 1e9),
                 PI_FREQ: p["freq_hz"], PI_ECN: int(p["ecn"]),
                 PI_MEAN_PKTSIZE: p["mean_pktsize_bytes"] or 0}, o


def _check_cake(net, q, p, rate_mbit):
    o = q["options"]
    assert q["kind"] == "cake", q
    # CAKE is a leaf under the HTB shaper: its own shaper unlimited (cake.py)
    assert o["bandwidth"] == "unlimited", o
    assert o["rtt"] == round(p["rtt_ms"] * 1000), ("rtt µs", o)
    assert o["flowmode"] == p["flow_mode"] and o["diffserv"] == p["diffserv"], o
    assert (o["nat"], o["wash"], o["split_gso"]) == (p["nat"], p["wash"], p["split_gso"]), o
    assert o["ack-filter"] == {"no-ack-filter": "disabled", "ack-filter": "enabled",
                               "ack-filter-aggressive": "aggressive"}[p["ack_filter"]], o
    assert o.get("memlimit") == p["limit_bytes"], o
    # its delay target: rtt / 20 on every tin (tc sends TCA_CAKE_TARGET = rtt / 20; no
    # rate of its own, so no tin raises it), the tins' interval the rtt
    tins = q.get("tins", q.get("xstats", {}).get("tins"))
    assert tins and len(tins) == {"diffserv3": 3, "diffserv4": 4, "diffserv8": 8,
                                  "besteffort": 1, "precedence": 8}[p["diffserv"]], q
    rtt_us = round(p["rtt_ms"] * 1000)
    for tin in tins:
        assert (tin["target_us"], tin["interval_us"]) == (rtt_us // 20, rtt_us), tin


CHECKS = {"fifo": _check_fifo, "pie": _check_pie, "red": _check_red, "codel": _check_codel,
          "fq_codel": _check_fq_codel, "pi": _check_pi, "cake": _check_cake}


def _cases_of(kind):
    assert kind in CASES and kind in CHECKS, (
        f"qdisc kind {kind!r} is registered but has no expected read-back here: add "
        f"non-default values for each of its options to CASES and a check to CHECKS")
    return CASES[kind]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cases_cover_every_option(kind):
    """Each option of each kind is set, somewhere in its cases, to a value that is not
    its default (a new option without a value fails here)."""
    info = KINDS[kind]
    defaults = {prm.name: prm.default for prm in info.params}
    cases = _cases_of(kind)
    for p in cases:
        assert set(p) <= set(defaults), f"{kind}: unknown options {set(p) - set(defaults)}"
    for name, default in defaults.items():
        assert any(name in p and p[name] != default for p in cases), \
            f"{kind}.{name}: no case sets it to a non-default value"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_option_of_every_kind_reads_back(kind, net_guard, monkeypatch):
    monkeypatch.setenv(rb.BURST_ENV, BURST_MS)
    for p in _cases_of(kind):
        topo = DumbbellTopo(bottleneck_mbit=RATE_MBIT, qdisc=kind, qdisc_params=dict(p))
        with Network(topo) as net:
            full = topo.qdisc.params        # the configured values with the defaults
            ns, dev = net.bottleneck_dev
            qdiscs = rb.tc_qdiscs(net, ns, dev)
            root = next(q for q in qdiscs if q.get("root"))
            assert root["kind"] == "htb" and root["handle"] == "1:", root
            q = rb.leaf(qdiscs)
            assert q["handle"] == "10:", q
            print(f"{kind} {p}: {q.get('options')}")
            CHECKS[kind](net, q, full, RATE_MBIT)
            classes = rb.htb_classes(net, ns, dev)
            rb.check_htb_class(classes["1:1"], RATE_MBIT, f"{kind} bottleneck")
            rb.check_host_sysctls(net)
            rb.check_socket(net, "h1", "cubic", bool(full.get("ecn")))


def test_scaled_rate_buffer_and_thresholds_read_back(net_guard, monkeypatch):
    """A study at 80 Mbit/s brought down to 20 (x0.25): the HTB class at 20 Mbit/s with
    the burst of 20 Mbit/s (under TCG 20 ms of it: 50,000 B), a 400-packet FIFO as 100
    packets, RED's limit and thresholds x0.25 (its bandwidth the scaled rate)."""
    monkeypatch.delenv(rb.BURST_ENV, raising=False)
    study = {"bottleneck_mbit": 80.0, "delay_ms": 0.0}
    fifo, fq, _, rec = scale_to_rate(dict(study, qdisc="fifo", buffer_pkts=400), {}, {}, 20.0)
    assert rec["factor"] == 0.25
    red_q = dict(limit_bytes=240_000, min_bytes=30_000, max_bytes=90_000,
                 avpkt_bytes=1000, probability=0.05)
    red, rq, _, _ = scale_to_rate(dict(study, qdisc="red"), red_q, {}, 20.0)
    with Network(DumbbellTopo(qdisc_params=fq, **fifo)) as net:
        ns, dev = net.bottleneck_dev
        rb.check_htb_class(rb.htb_classes(net, ns, dev)["1:1"], 20.0, "scaled bottleneck")
        q = rb.leaf(rb.tc_qdiscs(net, ns, dev))
        assert q["kind"] == "pfifo" and q["options"]["limit"] == 100, q
    with Network(DumbbellTopo(qdisc_params=rq, **red)) as net:
        ns, dev = net.bottleneck_dev
        rb.check_htb_class(rb.htb_classes(net, ns, dev)["1:1"], 20.0, "scaled bottleneck")
        q = rb.leaf(rb.tc_qdiscs(net, ns, dev))
        want = {k: round(v * 0.25) for k, v in red_q.items() if k.endswith("_bytes")
                and k != "avpkt_bytes"}
        _check_red(net, q, dict(red_q, **want, burst_pkts=None, ecn=False, adaptive=False),
                   20.0)


def _netem(net, ns, dev, parent="1:1"):
    qdiscs = rb.tc_qdiscs(net, ns, dev)
    q = rb.leaf(qdiscs, parent) if parent else next(q for q in qdiscs if q.get("root"))
    assert q["kind"] == "netem", f"{ns or 'root'}/{dev}: {q}"
    return q["options"]


def _check_netem(o, delay_ms, jitter_ms, loss_pct, where):
    assert o["limit"] == rb.NETEM_LIMIT_PKTS, (where, o)
    d = o.get("delay", {})
    assert d.get("delay", 0) == pytest.approx(rb.netem_seconds(delay_ms), abs=1e-9), \
        (where, "delay", o)
    assert d.get("jitter", 0) == pytest.approx(rb.netem_seconds(jitter_ms), abs=1e-9), \
        (where, "jitter", o)
    loss = o.get("loss-random", {}).get("loss", 0)
    assert loss == pytest.approx(loss_pct / 100, abs=1e-6), (where, "loss", o)


def _check_plain(net, ns, dev, where):
    q = rb.leaf(rb.tc_qdiscs(net, ns, dev))
    assert q["kind"] == "pfifo" and q["options"]["limit"] == rb.HOST_QUEUE_PKTS, (where, q)


def test_netem_delay_jitter_and_loss_read_back(net_guard, monkeypatch):
    monkeypatch.setenv(rb.BURST_ENV, BURST_MS)
    # per-sender RTTs 20 and 36 ms over a 4 ms bottleneck: each path's one netem stage
    # per direction holds RTT/2; jitter on every path; 1.5 % loss on h2's link both ways
    topo = KDumbbellTopo(k=2, rtt_ms="20,36", bottleneck_delay_ms=4, jitter_ms=1.5,
                         loss_pct=1.5, loss_link="h2", loss_dir="both", bottleneck_mbit=8,
                         host_mbit=200, reverse_mbit=3)
    with Network(topo) as net:
        rb.check_every_htb_class(net)
        for host, half_rtt, loss in (("h1", 10.0, 0.0), ("h2", 18.0, 1.5)):
            spec = next(s for s in topo.link_specs if s.a == host)
            h_if, port = net.intfs[(spec.a, spec.b)]
            _check_netem(_netem(net, host, h_if), half_rtt, 1.5, loss, f"{host} egress")
            _check_netem(_netem(net, None, port), half_rtt, 1.5, loss, f"port to {host}")
        ns, dev = net.bottleneck_dev
        assert rb.leaf(rb.tc_qdiscs(net, ns, dev))["kind"] == "pfifo"
        bn = topo.bottleneck
        _check_plain(net, bn.b, net.intfs[(bn.a, bn.b)][1], "receiver egress")
    # 2.5 % loss on the bottleneck both ways: forward after the queue (an IFB on the
    # receiver's ingress), reverse on the receiver's egress; the delay on the sender path
    topo = DumbbellTopo(delay_ms=2.0, loss_pct=2.5, loss_link="bottleneck", loss_dir="both",
                        bottleneck_mbit=8)
    with Network(topo) as net:
        rb.check_every_htb_class(net)
        _check_netem(_netem(net, "h1", "h1-eth0"), 4.0, 0.0, 0.0, "h1 egress")
        _check_netem(_netem(net, "h2", "ifb0", parent=None), 0.0, 0.0, 2.5, "h2 ifb0")
        _check_netem(_netem(net, "h2", "h2-eth0"), 0.0, 0.0, 2.5, "receiver egress")
        ns, dev = net.bottleneck_dev
        assert rb.leaf(rb.tc_qdiscs(net, ns, dev))["kind"] == "pfifo"


def test_host_sysctls_and_each_sockets_cca_and_ecn_read_back(net_guard, monkeypatch):
    monkeypatch.setenv(rb.BURST_ENV, BURST_MS)
    topo = KDumbbellTopo(k=4, ccas="reno,cubic,bbr,vegas", bottleneck_mbit=10, delay_ms=1,
                         ecn=True, rcvbuf_bytes=3 << 20, sndbuf_bytes=2 << 20,
                         slow_start_after_idle=0, advmss_bytes=1200, buffer_pkts=64)
    with Network(topo) as net:
        got = rb.check_host_sysctls(net)
        print(got)
        rb.check_every_htb_class(net)
        for host, cca in topo.ccas.items():
            rb.check_socket(net, host, cca, True, advmss=1200)
    # without ECN anywhere, no socket negotiates it; the namespaces keep tcp_ecn 2
    topo = KDumbbellTopo(k=2, ccas="vegas,reno", bottleneck_mbit=10, qdisc="codel")
    with Network(topo) as net:
        rb.check_host_sysctls(net)
        for host, cca in topo.ccas.items():
            rb.check_socket(net, host, cca, False)
