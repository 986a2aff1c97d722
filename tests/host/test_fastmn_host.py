"""Host kernel: Mininet's nodes configured in-process (bufferbloat/net/fastmn.py) come
out as Mininet's own shells configure them.

One network is built each way (BUFFERBLOAT_MININET_CONFIG=shell: Mininet's ifconfig and
brctl through the nodes' shells; the default: the same ioctls from this process), and
every host's interfaces (names, flags, MTU, MAC, IPv4 address, prefix and broadcast),
routes and the bridge's ports are compared; the in-process build runs no shell command
to configure them.
"""
import json
import os

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.net.network import Network
from bufferbloat.net.topology import KDumbbellTopo

K = 3


def snapshot(net):
    """What the build configured, without what differs between any two builds (ifindex,
    counters, IPv6 duplicate-address detection's state)."""
    out = {}
    for host in [h.name for h in net.net.hosts]:
        links = json.loads(net.run(host, ["ip", "-j", "link", "show"]))
        addrs = json.loads(net.run(host, ["ip", "-j", "-4", "addr", "show"]))
        out[host] = {
            "links": sorted((link["ifname"], tuple(sorted(link["flags"])), link["mtu"],
                             link.get("address"), link["operstate"]) for link in links),
            "addrs": sorted((a["ifname"], i["local"], i["prefixlen"], i.get("broadcast"),
                             i["scope"]) for a in addrs for i in a["addr_info"]),
            "routes": net.run(host, ["ip", "route", "show"]),
        }
    ports = json.loads(net.run(None, ["ip", "-j", "link", "show", "master", "s0"]))
    bridge = json.loads(net.run(None, ["ip", "-j", "link", "show", "s0"]))[0]
    out["s0"] = {"ports": sorted((p["ifname"], tuple(sorted(p["flags"])), p["operstate"])
                                 for p in ports),
                 "flags": tuple(sorted(bridge["flags"]))}
    return out


def build(monkeypatch, mode):
    monkeypatch.setenv(Network.MININET_CONFIG_ENV, mode)
    topo = KDumbbellTopo(k=K, bottleneck_mbit=10, switch="bridge")
    with Network(topo) as net:
        return snapshot(net), net.ns_calls


def test_in_process_configuration_equals_mininets_own(monkeypatch, net_guard):
    shell, shell_ns = build(monkeypatch, "shell")
    fast, fast_ns = build(monkeypatch, "in-process")
    assert fast == shell
    # every host has its address and loopback up; the bridge has all its ports
    for i in range(1, K + 2):
        assert (f"h{i}-eth0", f"10.0.0.{i}", 8, "10.255.255.255", "global") \
            in fast[f"h{i}"]["addrs"]
        assert any(link[0] == "lo" and "UP" in link[1] for link in fast[f"h{i}"]["links"])
    assert len(fast["s0"]["ports"]) == K + 1 and "UP" in fast["s0"]["flags"]
    # the in-process build made its calls inside the namespaces instead: per host its
    # MAC, address and loopback, per link end its "up", the bridge once
    assert fast_ns - shell_ns >= 3 * (K + 1) + 2 * (K + 1) + 1


def test_the_in_process_build_sends_no_configuration_through_the_shells(monkeypatch,
                                                                         net_guard):
    calls = []
    from mininet.node import Node
    real = Node.cmd

    def spy(self, *args, **kw):
        calls.append((self.name, " ".join(str(a) for a in args)))
        return real(self, *args, **kw)
    monkeypatch.setattr(Node, "cmd", spy)
    build(monkeypatch, "in-process")
    # all but the switch's own loopback (Mininet's Switch makes a plain Intf for it, in
    # this process's namespace, where it is up already)
    assert [c for c in calls if c[1].startswith(("ifconfig", "brctl"))] == \
        [("s0", "ifconfig lo up")], calls
    calls.clear()
    build(monkeypatch, "shell")
    shell = [c for c in calls if c[1].startswith(("ifconfig", "brctl"))]
    assert len(shell) > 5 * (K + 1)      # the spy sees Mininet's own: per host 5 and more


def test_a_bad_setting_is_refused_before_any_network_state(monkeypatch, net_guard):
    monkeypatch.setenv(Network.MININET_CONFIG_ENV, "fast")
    net = Network(KDumbbellTopo(k=1, bottleneck_mbit=10, switch="bridge"))
    with pytest.raises(UsageError) as err:
        net.start()
    assert "BUFFERBLOAT_MININET_CONFIG" in str(err.value) and "'fast'" in str(err.value)
    assert net.net is None and net.state is None


def test_the_hosts_shells_start_side_by_side_and_each_has_its_namespace(monkeypatch,
                                                                        net_guard):
    import threading

    from mininet.node import Node
    started, real = [], Node.startShell

    def spy(self, *args, **kw):
        started.append((self.name, threading.current_thread().name))
        return real(self, *args, **kw)
    monkeypatch.setattr(Node, "startShell", spy)
    monkeypatch.setenv(Network.MININET_CONFIG_ENV, "in-process")
    with Network(KDumbbellTopo(k=K, bottleneck_mbit=10, switch="bridge")) as net:
        hosts = {h.name: h.pid for h in net.net.hosts}
        spaces = {os.stat(f"/proc/{pid}/ns/net").st_ino for pid in hosts.values()}
    threads = dict(started)
    assert set(hosts) <= set(threads)
    assert all(threads[h].startswith("mn-shell") for h in hosts), threads
    assert threads["s0"] == threading.current_thread().name    # a switch: as before
    assert len(spaces) == len(hosts) == K + 1     # each its own, none the runner's
    assert os.stat("/proc/self/ns/net").st_ino not in spaces


def test_a_shell_that_fails_to_start_fails_the_build_and_leaves_nothing(monkeypatch,
                                                                        net_guard):
    from mininet.node import Node
    real = Node.startShell

    def failing(self, *args, **kw):
        if self.name == "h2":
            raise OSError("h2's shell refused (the test)")
        return real(self, *args, **kw)
    monkeypatch.setattr(Node, "startShell", failing)
    monkeypatch.setenv(Network.MININET_CONFIG_ENV, "in-process")
    before = mininet_shells()
    with pytest.raises(OSError, match="h2's shell refused"):
        Network(KDumbbellTopo(k=K, bottleneck_mbit=10, switch="bridge")).start()
    assert mininet_shells() == before      # the other hosts' shells were ended


def mininet_shells():
    """PIDs of Mininet's shells (bash -is mininet:NAME) on this machine."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"mininet:" in f.read():
                    out.add(pid)
        except OSError:
            pass
    return out
