"""Host kernel: the control path beside the emulated links (bufferbloat/net/control.py).

A TCP connection to the ruled port goes over the veth between the two hosts, unshaped;
one to any other port goes through the bottleneck at its rate. Measured with iperf3
(the two ports' goodputs against the bottleneck's rate) and with the byte counters of
the veth and of the bottleneck's qdisc.
"""
import json
import time

from bufferbloat.net.network import Network
from bufferbloat.net.reuse import NetworkKeeper, layouts_of
from bufferbloat.net.topology import DumbbellTopo

RATE_MBIT = 10
PORT = 5302          # the ruled port (a tool's control port)
OTHER_PORT = 5301    # its data port: through the emulated path


def iperf(net, port, seconds=2, reverse=False):
    """Goodput (Mbit/s) of one iperf3 flow h1 -> h2:port (``reverse``: h2 -> h1 on the
    connection h1 opened, as a passive side's upload goes)."""
    server = net.popen("h2", ["iperf3", "-s", "-1", "-p", str(port)])
    try:
        deadline = time.monotonic() + 10
        while str(port) not in net.run("h2", ["ss", "-Hltn", f"sport = :{port}"]):
            assert time.monotonic() < deadline, "iperf3 did not listen"
            time.sleep(0.05)
        out = net.run("h1", ["iperf3", "-c", net.ip("h2"), "-p", str(port), "-t",
                             str(seconds), "-J", *(["-R"] if reverse else [])], timeout=60)
    finally:
        server.wait(timeout=30)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6


def veth_tx_bytes(net, host="h1"):
    link = json.loads(net.run(host, ["ip", "-s", "-j", "link", "show", "bbctl0"]))[0]
    return link["stats64"]["tx"]["bytes"]


def bottleneck_bytes(net):
    ns, dev = net.bottleneck_dev
    return max(q["bytes"] for q in net.qdisc_show(ns, dev))


def test_the_ruled_port_goes_beside_the_bottleneck_and_the_others_through_it(net_guard):
    topo = DumbbellTopo(bottleneck_mbit=RATE_MBIT, switch="bridge")
    with Network(topo) as net:
        got = net.control_path("h1", "h2", PORT)
        assert got == {"dev": "bbctl0", "table": 1000, "port": PORT, "client": "h1",
                       "server": "h2"}
        veth0, bn0 = veth_tx_bytes(net), bottleneck_bytes(net)
        beside = iperf(net, PORT)
        veth1, bn1 = veth_tx_bytes(net), bottleneck_bytes(net)
        through = iperf(net, OTHER_PORT)
        veth2, bn2 = veth_tx_bytes(net), bottleneck_bytes(net)
    sent_beside = beside * 1e6 / 8 * 2      # at least what 2 s at that goodput carried
    # over the veth: unshaped (well above the bottleneck's rate), every byte on the veth,
    # none through the bottleneck's queue (its counters move by less than 1 %)
    assert beside > 3 * RATE_MBIT, beside
    assert veth1 - veth0 >= 0.9 * sent_beside
    assert bn1 - bn0 < 0.01 * sent_beside
    # any other port: through the bottleneck at its rate (5 % for HTB's burst), not the veth
    assert 0.5 * RATE_MBIT < through <= 1.05 * RATE_MBIT, through
    assert bn2 - bn1 >= 0.9 * through * 1e6 / 8 * 2
    assert veth2 - veth1 < 0.01 * (bn2 - bn1)


def test_a_second_port_and_the_other_direction_share_the_pair(net_guard):
    topo = DumbbellTopo(bottleneck_mbit=RATE_MBIT, switch="bridge")
    with Network(topo) as net:
        net.control_path("h1", "h2", PORT)
        again = net.control_path("h1", "h2", PORT + 2)
        back = net.control_path("h2", "h1", PORT + 4)
        assert again["dev"] == back["dev"] == "bbctl0" and back["table"] == 1000
        rules = net.run("h2", ["ip", "rule", "show", "table", "1000"])
        assert f"sport {PORT} " in rules + " " and f"sport {PORT + 2}" in rules
        assert f"dport {PORT + 4}" in rules
        # the server side of the reversed pair answers over the veth too
        route = net.run("h1", ["ip", "-o", "route", "get", net.ip("h2"), "from",
                               net.ip("h1"), "ipproto", "tcp", "sport", str(PORT + 4)])
        assert " dev bbctl0 " in route
        assert len([x for x in net.run("h1", ["ip", "-o", "link", "show"]).splitlines()
                    if "bbctl" in x]) == 1


def test_the_upload_back_to_the_client_goes_beside_it_under_a_strict_rp_filter(net_guard):
    """The passive side's results come back over the connection the client opened: from
    h2's port, over the veth. With rp_filter strict on both hosts (no ARP is needed: the
    neighbours are permanent) it still goes, unshaped."""
    topo = DumbbellTopo(bottleneck_mbit=RATE_MBIT, switch="bridge")
    with Network(topo) as net:
        for host in ("h1", "h2"):
            for conf in ("all", "default"):
                net.run(host, ["sysctl", "-qw", f"net.ipv4.conf.{conf}.rp_filter=1"])
        net.control_path("h1", "h2", PORT)
        for host in ("h1", "h2"):
            assert net.run(host, ["sysctl", "-n", "net.ipv4.conf.bbctl0.rp_filter"]).strip() == "1"
        up0, rev0 = veth_tx_bytes(net, "h2"), port_bytes(net, "h1")
        back = iperf(net, PORT, reverse=True)
        sent = back * 1e6 / 8 * 2
        assert back > 3 * RATE_MBIT, back
        assert veth_tx_bytes(net, "h2") - up0 >= 0.9 * sent
        # the switch's port towards h1 (the emulated reverse path) carried none of it
        assert port_bytes(net, "h1") - rev0 < 0.01 * sent


def port_bytes(net, host):
    """Bytes sent by the switch's port towards ``host`` (its qdiscs' largest count)."""
    port = next(ends[1] if a == host else ends[0]
                for (a, b), ends in net.intfs.items() if host in (a, b))
    return max(q["bytes"] for q in net.qdisc_show(None, port))


def test_a_kept_network_loses_its_control_paths_and_proves_it(net_guard):
    """A sweep's next point on the same network (bufferbloat/net/reuse.py): the control
    paths of the point before are removed, each host's routes, rules and interfaces are
    the fresh build's again, and the next point's own path works; a rule nobody removed
    is found, and that network is not used again."""
    topo = DumbbellTopo(bottleneck_mbit=RATE_MBIT, switch="bridge")
    hosts = ["h1", "h2"]
    with NetworkKeeper(enabled=True) as keeper:
        with keeper.network(Network(topo)) as (net, _):
            fresh = layouts_of(net, hosts)
            assert fresh == net.fresh_layout
            net.control_path("h1", "h2", PORT)
            net.control_path("h2", "h1", PORT + 4)
            dirty = layouts_of(net, hosts)
            assert "bbctl0" in dirty["h1"]["devices"] and "bbctl0" in dirty["h2"]["devices"]
            assert any(f"dport {PORT}" in r for r in dirty["h1"]["rules"])
        with keeper.network(Network(topo)) as (again, reused):
            assert again is net and reused["reused"] is True, reused
            assert reused["clean"]["control_paths_removed"] == 1
            assert layouts_of(again, hosts) == fresh
            got = again.control_path("h1", "h2", PORT)       # the next point's own
            assert got["dev"] == "bbctl0"
            assert iperf(again, PORT) > 3 * RATE_MBIT         # unshaped: over the veth
            # a rule nobody will remove: the next point cannot be proven clean
            again.run("h2", ["ip", "rule", "add", "to", "10.9.9.9/32", "lookup", "1500",
                             "pref", "1500"])
        with keeper.network(Network(topo)) as (third, why):
            assert third is not net and why["reused"] is False
            assert "h2's rules" in why["why"] and "10.9.9.9/32" in why["why"], why
