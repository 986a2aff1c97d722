"""Everything configured is read back from the host kernel, where this
kernel can hold it: namespaces, a Linux bridge, HTB, pfifo/bfifo, sysctls, reno and
cubic (this machine has no sch_netem, sch_pie, sch_red, sch_codel or sch_cake: the
project VM's tests/vm/test_readback_vm.py reads those back).

* every link direction's HTB class: rate, ceil, burst and cburst, with a burst time
  from the environment and with none (tc's default: rate / psched HZ + 1600 B);
* the FIFO leaf: pfifo's limit in packets, bfifo's in bytes; every other leaf the
  documented 10,000-packet pfifo;
* a study's rate scaled down to 20 Mbit/s (x0.25): the class at the scaled rate, the
  FIFO's buffer x0.25;
* each host's sysctls and each sender's TCP socket: its congestion control, ECN
  negotiated or not as configured, its MSS from the advertised advmss.

How each value is read: tests/readback.py.
"""
import pytest

from bufferbloat.net.network import Network
from bufferbloat.net.scaling import scale_to_rate
from bufferbloat.net.topology import DumbbellTopo, KDumbbellTopo
from tests import readback as rb


def _leaves(net):
    """{(ns, dev): its leaf at 1:1} of every shaped link direction."""
    return {(ns, dev): rb.leaf(rb.tc_qdiscs(net, ns, dev))
            for ns, dev, _rate, _what in rb.link_directions(net)}


def test_htb_fifo_sysctls_and_sockets_read_back(net_guard, monkeypatch):
    monkeypatch.setenv(rb.BURST_ENV, "12")
    topo = KDumbbellTopo(k=2, ccas="reno,cubic", bottleneck_mbit=12, host_mbit=300,
                         reverse_mbit=7, buffer_pkts=37, ecn=True, rcvbuf_bytes=3 << 20,
                         sndbuf_bytes=2 << 20, slow_start_after_idle=0, advmss_bytes=1200,
                         switch="bridge")
    with Network(topo) as net:
        rb.check_every_htb_class(net)
        bottleneck = net.bottleneck_dev
        for where, q in _leaves(net).items():
            limit = 37 if where == bottleneck else rb.HOST_QUEUE_PKTS
            assert q["kind"] == "pfifo" and q["handle"] == "10:", (where, q)
            assert q["options"]["limit"] == limit, (where, q)
        print(rb.check_host_sysctls(net))
        for host, cca in topo.ccas.items():
            rb.check_socket(net, host, cca, True, advmss=1200)


@pytest.mark.parametrize("qdisc_params, tc_kind, limit", [
    (dict(limit_pkts=23), "pfifo", 23), (dict(limit_bytes=45_000), "bfifo", 45_000)],
    ids=["pfifo", "bfifo"])
def test_fifo_limit_and_default_burst_read_back(qdisc_params, tc_kind, limit, net_guard,
                                                monkeypatch):
    monkeypatch.delenv(rb.BURST_ENV, raising=False)
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)
    topo = DumbbellTopo(bottleneck_mbit=9, qdisc="fifo", qdisc_params=qdisc_params,
                        cca="reno", switch="bridge")
    with Network(topo) as net:
        rb.check_every_htb_class(net)          # no burst given: tc's default
        q = rb.leaf(rb.tc_qdiscs(net, *net.bottleneck_dev))
        assert q["kind"] == tc_kind and q["options"]["limit"] == limit, q
        rb.check_host_sysctls(net)
        rb.check_socket(net, "h1", "reno", False)


def test_scaled_rate_and_buffer_read_back(net_guard, monkeypatch):
    monkeypatch.setenv(rb.BURST_ENV, "20")
    params, qparams, _, rec = scale_to_rate(
        {"bottleneck_mbit": 80.0, "qdisc": "fifo", "buffer_pkts": 400}, {}, {}, 20.0)
    assert rec["factor"] == 0.25
    with Network(DumbbellTopo(qdisc_params=qparams, switch="bridge", **params)) as net:
        ns, dev = net.bottleneck_dev
        rb.check_htb_class(rb.htb_classes(net, ns, dev)["1:1"], 20.0, "scaled bottleneck")
        q = rb.leaf(rb.tc_qdiscs(net, ns, dev))
        assert q["kind"] == "pfifo" and q["options"]["limit"] == 100, q
