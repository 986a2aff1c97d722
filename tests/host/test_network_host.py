"""Host kernel: build/teardown, offloads, readback, refusal before any state.

Kernel-independent: what the kernel lacks is refused before any network state exists,
tested with the capability stubbed off (so the refusal is tested on every kernel, the
project VM's 6.1 included, which has every module); what the kernel has is built, read
back and, for a delay, measured (docs/design/platform.md: this machine kind lacks sch_netem,
sch_pie, sch_red, sch_codel, sch_fq_codel, openvswitch, tcp_vegas; the VM has them all).
"""
import os
import re
import subprocess
import time

import pytest
from conftest import _links

from bufferbloat.core.errors import MissingFeature
from bufferbloat.net.capabilities import Capabilities, Capability, probe
from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo, KDumbbellTopo


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


def _netns_of(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except (FileNotFoundError, PermissionError):   # gone; or a sandbox's hidden PID 1
        return None


def test_the_teardown_ends_the_shells_and_their_veths_go_with_them(net_guard):
    """The teardown ends each host's shell; the kernel removes the veths with the
    namespaces: no ``ip link del`` a port, and none of the hosts' namespaces is left."""
    topo = KDumbbellTopo(k=3, bottleneck_mbit=10, switch="bridge")
    with Network(topo) as net:
        shells = {h: net.net[h].pid for h in ("h1", "h2", "h3", "h4")}
        spaces = {_netns_of(pid) for pid in shells.values()}
        ports = [i.name for sw in net.net.switches for i in sw.intfList()
                 if i.name != "lo"]
        assert len(ports) == 4 and None not in spaces and len(spaces) == 4
        calls = net.tool_calls
    assert net.tool_calls - calls == 1          # the bridge's ip link del, no port's
    assert not [p for p in ports + ["s0"] if p in _links()]
    assert all(_netns_of(pid) is None for pid in shells.values())
    live = {_netns_of(pid) for pid in os.listdir("/proc") if pid.isdigit()}
    assert not spaces & live, "a host's namespace is still held by a process"
    assert 0 < net.timings["teardown_s"] < 30


def test_a_port_whose_namespace_lives_on_is_deleted_after_the_wait(net_guard, monkeypatch):
    """A process the network did not start keeps h1's namespace (and its veth) alive:
    after LINKS_GONE_S the teardown deletes the switch's end (the pair goes with it)."""
    monkeypatch.setattr(Network, "LINKS_GONE_S", 0.3)
    topo = KDumbbellTopo(k=1, bottleneck_mbit=10, switch="bridge")
    holder = None
    try:
        with Network(topo) as net:
            h1_ns = _netns_of(net.net["h1"].pid)
            holder = subprocess.Popen(["nsenter", "-t", str(net.net["h1"].pid), "-n", "--",
                                       "sleep", "60"])
            # nsenter joins the namespace after it starts: leaving the block before
            # that would end h1's shell first and the holder would hold nothing
            deadline = time.monotonic() + 10
            while _netns_of(holder.pid) != h1_ns:
                assert holder.poll() is None, "nsenter could not enter h1's namespace"
                assert time.monotonic() < deadline, "nsenter did not enter h1's namespace"
                time.sleep(0.01)
            calls = net.tool_calls
        assert net.tool_calls - calls == 2      # h1's port, then the bridge
        assert not [p for p in ("s0", "s0-eth1", "s0-eth2") if p in _links()]
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()


#: (topology parameters, the one kernel feature they need beyond HTB + pfifo + bridge)
NEEDS = [
    (dict(qdisc="pie"), "sch_pie"),
    (dict(qdisc="red"), "sch_red"),
    (dict(qdisc="codel"), "sch_codel"),
    (dict(qdisc="fq_codel"), "sch_fq_codel"),
    (dict(delay_ms=5), "sch_netem"),
    (dict(loss_pct=1), "sch_netem"),
    (dict(switch="ovs"), "openvswitch"),
    (dict(cca="vegas"), "vegas"),
]
IDS = [f"{missing}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for p, missing in NEEDS]


def lacking_only(name):
    """This machine's capabilities as if it had everything but ``name``."""
    real = probe()
    assert name in {r.name for r in real.rows}, f"{name} is not a capability row"
    rows = [Capability(r.name, r.kind, r.name != name,
                       "stubbed off by the test" if r.name == name else "stubbed on")
            for r in real.rows]
    return Capabilities(rows, real.kernel_release, real.hz)


@pytest.mark.parametrize("params,missing", NEEDS, ids=IDS)
def test_refuses_a_missing_feature_before_touching_the_network(params, missing, net_guard):
    """On any kernel: with ``missing`` stubbed off (and everything else stubbed on), the
    start refuses naming it, and only it, with the way out (--vm), and no link is made."""
    before = _links()
    with pytest.raises(MissingFeature) as err:
        Network(DumbbellTopo(**params), caps=lacking_only(missing)).start()
    assert [m.split()[0] for m in err.value.missing] == [missing], err.value.missing
    assert "stubbed off by the test" in str(err.value) and "--vm" in str(err.value)
    assert _links() == before


def _ping_rtts_ms(net, count=5):
    out = net.run("h1", ["ping", "-n", "-c", str(count), "-i", "0.2", net.ip("h2")])
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]


def _netem_lines(net):
    """tc's text lines of every netem the network installed (every configured device)."""
    lines = []
    for ns, dev in sorted({(s.ns, s.argv[4]) for s in net.plan
                           if s.argv[:2] == ("tc", "qdisc")}, key=str):
        lines += [ln for ln in net.run(ns, ["tc", "qdisc", "show", "dev", dev]).splitlines()
                  if ln.startswith("qdisc netem")]
    return lines


def _check_built(net, params, missing):
    """What each feature must show once built: the AQM as the shaper's leaf, the
    configured delay in the measured RTT, the loss in netem, OVS as the switch, the CCA
    in the sender's namespace; and the path carries packets (every ping answered)."""
    tree = net.bottleneck_tree()
    assert tree["root"]["kind"] == "htb"
    rtts = _ping_rtts_ms(net)
    if missing == "sch_netem" and "delay_ms" in params:
        # 4 links' worth of one-way delay: 4 x 5 = 20 ms; TCG adds 0.8-1.5 ms of its own,
        # never less than configured (docs/design/health.md, idle_rtt: base - 0.5 to base + 3)
        base = net.topo.base_rtt_ms()
        assert base == 20
        assert base - 0.5 <= min(rtts) <= base + 3.0, rtts
        # each sender's path stage holds both links' delay (access + bottleneck: 10 ms),
        # one stage per direction (bufferbloat.net.bottleneck.plan_network); "delay 5ms"
        # was asserted here until the host tier first ran where the kernel has netem
        lines = _netem_lines(net)
        assert lines and all("delay 10ms" in ln for ln in lines), lines
    else:
        assert min(rtts) < 5.0, rtts                            # no delay configured
    # every ping answered, but where 1 % of h1's packets are dropped (P(a loss in 5) 5 %)
    assert len(rtts) >= (3 if "loss_pct" in params else 5), rtts
    if missing == "sch_netem" and "loss_pct" in params:
        assert any(re.search(r"\bloss 1%", ln) for ln in _netem_lines(net)), \
            _netem_lines(net)
    if "qdisc" in params:
        assert tree["leaf"]["kind"] == params["qdisc"], tree["leaf"]
    else:
        assert tree["leaf"]["kind"] == "pfifo", tree["leaf"]
    if missing == "openvswitch":
        assert net.switch_kind == "ovs"
        assert "s0" in net.run(None, ["ovs-vsctl", "list-br"]).split()
    if missing == "vegas":
        got = net.run("h1", ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).strip()
        assert got == "vegas"


@pytest.mark.parametrize("params,missing", NEEDS, ids=IDS)
def test_built_and_read_back_where_the_kernel_has_it_else_refused(params, missing,
                                                                  net_guard):
    """On this kernel, unstubbed: where it has every feature the topology needs (the
    project VM), the network is built and shows the feature working (see _check_built);
    where it lacks ``missing`` (this machine kind), the real probe refuses it before any
    link is made."""
    topo = DumbbellTopo(**params)
    net = Network(topo)
    lacks = net.caps.missing(net.features)
    print(f"kernel {net.caps.kernel_release}: needs {missing}: "
          f"{'has it' if net.caps.has(missing) else 'lacks it'}; missing: {lacks}")
    if lacks:
        before = _links()
        with pytest.raises(MissingFeature) as err:
            net.start()
        assert sorted(err.value.missing) == sorted(lacks)
        assert "--vm" in str(err.value)
        assert _links() == before
        return
    with net:
        _check_built(net, params, missing)


def test_the_built_network_check_on_this_kernel(net_guard):
    """_check_built's kernel-independent part, run here on the plain dumbbell (HTB +
    pfifo, Linux bridge): the tree read back, every ping answered without delay."""
    with Network(DumbbellTopo(switch="bridge")) as net:
        _check_built(net, {}, None)
