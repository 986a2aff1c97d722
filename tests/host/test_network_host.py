"""Host kernel: build/teardown, offloads, readback, refusal before any state."""
import pytest

from bufferbloat.capabilities import probe
from bufferbloat.errors import MissingFeature
from bufferbloat.network import Network
from bufferbloat.topology import DumbbellTopo, KDumbbellTopo

from conftest import _links


def test_tree_readback_offloads_and_ccas(net_guard):
    topo = KDumbbellTopo(k=2, bottleneck_mbit=10, buffer_pkts=50, ccas="reno,cubic",
                         switch="bridge")
    with Network(topo) as net:
        tree = net.bottleneck_tree()
        assert tree["root"]["kind"] == "htb" and tree["leaf"]["kind"] == "pfifo"
        assert tree["leaf"]["options"]["limit"] == 50
        installed = net.describe()["installed"]
        assert set(installed) == {"h1/h1-eth0", "h2/h2-eth0", "h3/h3-eth0", "root/s0-eth1",
                                  "root/s0-eth2", "root/s0-eth3"}
        for where in installed.values():
            assert {q["kind"] for q in where["qdiscs"]} == {"htb", "pfifo"}
            assert where["classes"].startswith("class htb 1:1 root")
        assert "rate 10Mbit ceil 10Mbit" in installed["root/s0-eth3"]["classes"]
        assert "rate 1Gbit ceil 1Gbit" in installed["h1/h1-eth0"]["classes"]
        for host, cca in (("h1", "reno"), ("h2", "cubic")):
            got = net.run(host, ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).strip()
            assert got == cca
        for host in ("h1", "h3"):
            feats = net.run(host, ["ethtool", "-k", f"{host}-eth0"])
            assert "generic-segmentation-offload: off" in feats
            assert "tcp-segmentation-offload: off" in feats
            assert "generic-receive-offload: off" in feats
        assert net.timings["build_s"] > 0


@pytest.mark.parametrize("params,missing", [
    (dict(qdisc="pie"), "sch_pie"),
    (dict(qdisc="red"), "sch_red"),
    (dict(qdisc="codel"), "sch_codel"),
    (dict(qdisc="fq_codel"), "sch_fq_codel"),
    (dict(delay_ms=5), "sch_netem"),
    (dict(loss_pct=1), "sch_netem"),
    (dict(switch="ovs"), "openvswitch"),
    (dict(cca="vegas"), "vegas"),
])
def test_host_refuses_what_its_kernel_lacks_before_touching_the_network(params, missing,
                                                                        net_guard):
    if probe().has(missing):
        pytest.fail(f"this host has {missing}: these host tests assume the project's "
                    "host kernel (PLATFORM.md); run the VM suite instead")
    before = _links()
    with pytest.raises(MissingFeature) as err:
        Network(DumbbellTopo(**params)).start()
    assert missing in str(err.value) and "--vm" in str(err.value)
    assert _links() == before
