"""Topologies and the qdisc plan that realises them (no root, no network needed)."""
import pytest

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.net import bottleneck as bn
from bufferbloat.net.topology import DumbbellTopo, KDumbbellTopo, make_topo

INTFS = {("h1", "s0"): ("h1-eth0", "s0-eth1"), ("s0", "h2"): ("s0-eth2", "h2-eth0")}


def plan_for(topo, intfs=INTFS):
    return bn.plan_network(topo, intfs)


def steps_on(plan, dev):
    return [s for s in plan if dev in s.argv]


def test_dumbbell_shape():
    t = DumbbellTopo(bottleneck_mbit=1.5, delay_ms=5, buffer_pkts=100)
    assert sorted(t.hosts()) == ["h1", "h2"] and t.switches() == ["s0"]
    assert {tuple(sorted(link)) for link in t.links()} == {("h1", "s0"), ("h2", "s0")}
    assert t.base_rtt_ms() == 20
    assert t.bottleneck.a == "s0" and t.bottleneck.b == "h2" and t.bottleneck.rate_mbit == 1.5
    assert t.qdisc.kind == "fifo" and t.qdisc.params["limit_pkts"] == 100


def test_aqm_is_the_shapers_leaf_on_the_bottleneck_port():
    t = DumbbellTopo(bottleneck_mbit=1.5, qdisc="pie", qdisc_params={"target_ms": 20})
    steps = steps_on(plan_for(t), "s0-eth2")
    root, cls, leaf = steps
    assert root.ns is None  # the switch port lives in the root namespace
    assert root.argv[:9] == ("tc", "qdisc", "replace", "dev", "s0-eth2", "root", "handle",
                             "1:", "htb")
    assert ("rate", "1500000bit") == cls.argv[cls.argv.index("rate"):][:2]
    assert leaf.argv[5:9] == ("parent", "1:1", "handle", "10:")
    assert leaf.argv[9] == "pie" and "20ms" in leaf.argv
    # nothing but the AQM may hold the bottleneck's queue: no netem on the port
    assert not any("netem" in s.argv for s in steps)


def test_delay_never_shares_a_queue_with_the_aqm():
    t = DumbbellTopo(bottleneck_mbit=1.5, delay_ms=5, qdisc="pie")
    plan = plan_for(t)
    netems = [s for s in plan if "netem" in s.argv]
    # one delaying stage per path direction: both links' delay together (5 + 5 ms)
    assert {(s.ns, s.argv[4]) for s in netems} == {("h1", "h1-eth0"), (None, "s0-eth1")}
    for s in netems:
        assert s.argv[s.argv.index("delay") + 1] == "10ms"
        assert s.argv[5:9] == ("parent", "1:1", "handle", "10:")  # the shaper's leaf
        assert int(s.argv[s.argv.index("limit") + 1]) >= 10000  # never the buffer
    # the bottleneck port and the receiver hold no netem; no IFB without bottleneck loss
    assert not any("netem" in s.argv for s in steps_on(plan, "s0-eth2") + steps_on(plan, "h2-eth0"))
    assert not any(bn.IFB_DEV in s.argv for s in plan)


def test_k_senders_get_their_own_path_delay():
    t = KDumbbellTopo(k=2, bottleneck_delay_ms=5, rtt_ms="20,60")
    intfs = {("h1", "s0"): ("h1-eth0", "s0-eth1"), ("h2", "s0"): ("h2-eth0", "s0-eth2"),
             ("s0", "h3"): ("s0-eth3", "h3-eth0")}
    plan = plan_for(t, intfs)
    delay = {s.argv[4]: s.argv[s.argv.index("delay") + 1] for s in plan if "netem" in s.argv}
    assert delay == {"h1-eth0": "10ms", "s0-eth1": "10ms", "h2-eth0": "30ms",
                     "s0-eth2": "30ms"}


def test_no_impairment_means_no_netem_and_no_ifb():
    plan = plan_for(DumbbellTopo(bottleneck_mbit=10))
    assert not any("netem" in s.argv or bn.IFB_DEV in s.argv for s in plan)


@pytest.mark.parametrize("link,direction,where", [
    ("access", "forward", [("h1-eth0", "h1")]),
    ("access", "reverse", [("s0-eth1", None)]),
    ("access", "both", [("h1-eth0", "h1"), ("s0-eth1", None)]),
    ("bottleneck", "forward", [(bn.IFB_DEV, "h2")]),  # after the queue
    ("bottleneck", "reverse", [("h2-eth0", "h2")]),
])
def test_loss_lands_on_the_chosen_link_and_direction(link, direction, where):
    t = DumbbellTopo(loss_pct=2, loss_link=link, loss_dir=direction)
    lossy = {(s.argv[4], s.ns) for s in plan_for(t) if "loss" in s.argv}
    assert lossy == set(where)
    for s in plan_for(t):
        if "loss" in s.argv:
            assert s.argv[s.argv.index("loss"):][:3] == ("loss", "random", "2%")


def test_k_dumbbell_per_sender_rtt_and_cca():
    t = KDumbbellTopo(k=3, delay_ms=0, bottleneck_delay_ms=5, rtt_ms="20,40,60",
                      ccas="reno,cubic,bbr")
    assert t.senders == ["h1", "h2", "h3"] and t.receiver == "h4"
    assert [t.base_rtt_ms(h) for h in t.senders] == [20, 40, 60]
    assert t.ccas == {"h1": "reno", "h2": "cubic", "h3": "bbr"}
    assert t.bottleneck.b == "h4"


@pytest.mark.parametrize("params,name", [
    (dict(bottleneck_mbit=0), "bottleneck_mbit"),
    (dict(bottleneck_mbit=-1.5), "bottleneck_mbit"),
    (dict(host_mbit="fast"), "host_mbit"),
    (dict(delay_ms=-1), "delay_ms"),
    (dict(loss_pct=101), "loss_pct"),
    (dict(loss_pct=-0.5), "loss_pct"),
    (dict(delay_ms=5, jitter_ms=6), "jitter_ms"),
    (dict(loss_link="h7"), "loss_link"),
    (dict(loss_dir="up"), "loss_dir"),
    (dict(qdisc="sfq"), "qdisc"),
    (dict(cca="westwood"), "cca"),
    (dict(buffer_pkts=0), "buffer_pkts"),
    (dict(buffer_bytes=100), "buffer_bytes"),
    (dict(switch="p4"), "switch"),
])
def test_bad_topology_parameters(params, name):
    with pytest.raises(ParameterError) as err:
        DumbbellTopo(**params)
    assert name in str(err.value)


@pytest.mark.parametrize("params,name", [
    (dict(k=0), "k"),
    (dict(k=2, rtt_ms="10,20,30"), "rtt_ms"),
    (dict(k=2, rtt_ms="10;20"), "rtt_ms"),
    (dict(k=2, bottleneck_delay_ms=10, rtt_ms="10"), "rtt_ms"),
    (dict(k=2, ccas="cubic,westwood"), "ccas"),
])
def test_bad_k_dumbbell_parameters(params, name):
    with pytest.raises(ParameterError) as err:
        KDumbbellTopo(**params)
    assert name in str(err.value)


def test_unknown_topology_parameter_is_refused():
    with pytest.raises(UsageError, match="bottleneck_mbit"):
        make_topo("dumbbell", bandwidth=10)
    with pytest.raises(UsageError, match="dumbbell"):
        make_topo("star")


def test_features_follow_what_the_topology_uses():
    plain = bn.features_for(DumbbellTopo())
    assert "sch_netem" not in plain and "ifb" not in plain and "sch_fifo" in plain
    assert "cubic" in plain
    delayed = bn.features_for(DumbbellTopo(qdisc="pie", delay_ms=5, cca="vegas"))
    assert {"sch_netem", "sch_pie", "vegas"} <= set(delayed) and "ifb" not in delayed
    lossy = bn.features_for(DumbbellTopo(loss_pct=1, loss_link="bottleneck"))
    assert {"sch_netem", "ifb", "act_mirred", "sch_ingress", "cls_u32"} <= set(lossy)


def test_aqm_both_ways_puts_the_aqm_on_the_reverse_bottleneck_too():
    t = DumbbellTopo(bottleneck_mbit=10, qdisc="pie", aqm_both_ways=True)
    rev = steps_on(plan_for(t), "h2-eth0")
    assert rev[0].ns == "h2" and rev[-1].argv[9] == "pie"
    assert ("rate", "10000000bit") == rev[1].argv[rev[1].argv.index("rate"):][:2]
    plain = steps_on(plan_for(DumbbellTopo(bottleneck_mbit=10, qdisc="pie")), "h2-eth0")
    assert plain[-1].argv[9] == "pfifo"
    with pytest.raises(ParameterError):
        DumbbellTopo(qdisc="pie", aqm_both_ways=True, loss_pct=1, loss_link="bottleneck",
                     loss_dir="reverse")


def test_reverse_qdisc_gives_the_receiver_its_own_queue():
    """Study B's testbed: the router's PIE on the uploads only, the server's own NIC
    (its distribution's default qdisc, fq_codel with its defaults) on the downloads."""
    t = DumbbellTopo(bottleneck_mbit=10, qdisc="pie", reverse_qdisc="fq_codel",
                     reverse_mbit=10)
    fwd = steps_on(plan_for(t), "s0-eth2")
    rev = steps_on(plan_for(t), "h2-eth0")
    assert fwd[-1].argv[9] == "pie" and rev[-1].argv[9] == "fq_codel"
    assert rev[0].ns == "h2"
    assert ("target", "5ms") == rev[-1].argv[rev[-1].argv.index("target"):][:2]
    assert {"sch_pie", "sch_fq_codel"} <= set(bn.features_for(t))
    with pytest.raises(ParameterError):
        DumbbellTopo(qdisc="pie", reverse_qdisc="fq_codel", aqm_both_ways=True)
    with pytest.raises(ParameterError):
        DumbbellTopo(qdisc="pie", reverse_qdisc="fq_codel", loss_pct=1,
                     loss_link="bottleneck", loss_dir="both")
    with pytest.raises(ParameterError):
        DumbbellTopo(reverse_qdisc="nosuch")


def test_b_is_the_studys_testbed_with_the_dumbbell_as_a_variant():
    from bufferbloat.net import scaling
    from bufferbloat.scenarios import catalogue
    for name in ("b1_pie_tupdate", "b2_pie_target"):
        scn = catalogue()[name]
        for overrides in ({}, {"variant": "testbed"}):
            topo = scn.build(overrides)[0]
            # a LAN's 0.25 ms a link (docs/design/testbed-b.md: at 0 ms PIE stayed undropping)
            assert topo.params["delay_ms"] == 0.25 and topo.base_rtt_ms("h1") == 1.0
            assert topo.params["host_mbit"] == 1000
            assert topo.qdisc.kind == "pie"
            assert topo.reverse_qdisc.kind == "fq_codel" and not topo.params["aqm_both_ways"]
        old = scn.build({"variant": "dumbbell"})[0]
        assert old.params["aqm_both_ways"] and old.reverse_qdisc is None
        assert old.base_rtt_ms("h1") == 20
        assert scaling.loaded_both_ways(scn)     # RRUL: half the TCG cap each way


def test_reverse_rate_of_the_bottleneck_link():
    rev = steps_on(plan_for(DumbbellTopo(bottleneck_mbit=1.5)), "h2-eth0")
    assert ("rate", "1500000bit") == rev[1].argv[rev[1].argv.index("rate"):][:2]
    rev = steps_on(plan_for(DumbbellTopo(bottleneck_mbit=1.5, reverse_mbit=1000)), "h2-eth0")
    assert ("rate", "1000000000bit") == rev[1].argv[rev[1].argv.index("rate"):][:2]
    with pytest.raises(ParameterError):
        DumbbellTopo(reverse_mbit=0)
