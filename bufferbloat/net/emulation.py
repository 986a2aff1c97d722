"""Mininet's part of a :class:`~bufferbloat.net.network.Network`: build its hosts, switch
and links, record what Mininet made in the state file (for the recovery after a killed
run), and stop it again.

The functions take the network and keep Mininet's object in its ``net`` attribute, the
interfaces of each link in its ``intfs``. Mininet is imported only here, and only when a
network is built.
"""

import os
import time

from bufferbloat.core.errors import CommandError, UsageError
from bufferbloat.net.cleanup import link_index
from bufferbloat.net.links import link_interfaces, planned_root_links

#: Mininet's interfaces, loopbacks and Linux bridges set up from this process
#: (:mod:`bufferbloat.net.fastmn`) rather than through its shells; env
#: BUFFERBLOAT_MININET_CONFIG=shell keeps Mininet's own way (to compare the two)
MININET_CONFIG_ENV = "BUFFERBLOAT_MININET_CONFIG"


def in_process_config():
    """Whether the build configures Mininet's nodes in-process (the default)."""
    value = os.environ.get(MININET_CONFIG_ENV, "in-process")
    if value not in ("in-process", "shell"):
        raise UsageError(f"invalid value for {MININET_CONFIG_ENV}: {value!r} "
                         "(allowed: in-process, shell)")
    return value == "in-process"


def build(net):
    """Build and start ``net``'s Mininet network (``net.net``) from its topology, with
    its switch kind; ``net.intfs`` gets the interfaces of each link. The in-process
    configuration's calls inside a namespace are added to ``net.ns_calls``."""
    from mininet.link import Link  # noqa: PLC0415 - Mininet only where a network is built
    from mininet.log import setLogLevel  # noqa: PLC0415 - Mininet only where a network is built
    from mininet.net import Mininet  # noqa: PLC0415 - Mininet only where a network is built
    from mininet.node import OVSBridge  # noqa: PLC0415 - Mininet only where a network is built
    from mininet.nodelib import LinuxBridge  # noqa: PLC0415 - Mininet only where a network is built

    setLogLevel(os.environ.get("BUFFERBLOAT_MININET_LOG", "warning"))
    kinds, bridge, mininet = {}, LinuxBridge, Mininet
    if in_process_config():
        from bufferbloat.net import fastmn  # noqa: PLC0415 - imports Mininet
        kinds = {"host": fastmn.FastHost, "intf": fastmn.FastIntf}
        bridge, mininet, calls0 = fastmn.FastLinuxBridge, fastmn.FastMininet, fastmn.calls
    switch = OVSBridge if net.switch_kind == "ovs" else bridge
    net.net = mininet(topo=None, switch=switch, controller=None, link=Link,
                      autoSetMacs=True, build=False, waitConnected=False, **kinds)
    # Build through the network's reference so that a failure half-way is still torn down.
    net.net.topo = net.topo.to_mininet()
    if net.state is not None:
        net.state.plan_links(planned_root_links(net.topo))
    try:
        net.net.build()
        record(net)
        net.net.start()
        record(net)
    finally:
        if kinds:
            net.ns_calls += fastmn.calls - calls0
    net.intfs.update(link_interfaces(net.net, net.topo))


def record(net):
    """Record Mininet's shells (by PID and start time) and root-namespace links in
    ``net``'s state file."""
    if net.state is None or net.net is None:
        return
    state, mn = net.state, net.net
    for node in list(mn.hosts) + list(mn.switches):
        if getattr(node, "pid", None) and str(node.pid) not in state.data["procs"]:
            state.add_proc(node.pid, f"mininet shell {node.name}")
    names = []
    for sw in mn.switches:
        names.append(sw.name)
        names += [i.name for i in sw.intfList() if i.name != "lo"]
    state.add_links(names)
    if net.switch_kind == "ovs":
        state.data.setdefault("ovs_bridges", [])
        for sw in mn.switches:
            if sw.name not in state.data["ovs_bridges"]:
                state.data["ovs_bridges"].append(sw.name)
        state.save()


def stop(net, mn):
    """Stop ``net``'s Mininet network ``mn``: Mininet's stop, without its ``ip link del``
    of every veth end through a shell (150 ms each under TCG: 42 at k = 20,
    bench/bench_build.py).

    With a Linux bridge: end each host's shell (Mininet's terminate: its process group,
    by PID, waited for); the host's namespace goes with its last process, and the kernel
    removes the veth pairs in it, the switch's ends with them. Wait (``net.LINKS_GONE_S``
    at most) for the switch's ports to be gone; delete any still there, then the bridge
    (one ``ip link del`` each, through ``net.run``) and end the switch's shell. A link
    that is still there after that fails the stop, naming it (the state file keeps it
    for the next run's recovery). Open vSwitch keeps bridges in its database: Mininet's
    own stop."""
    if net.switch_kind != "bridge":
        mn.stop()
        return
    ports = [i.name for sw in mn.switches for i in sw.intfList() if i.name != "lo"]
    bridges = [sw.name for sw in mn.switches]
    for host in mn.hosts:
        host.terminate()
    deadline = time.monotonic() + net.LINKS_GONE_S
    while any(link_index(p) is not None for p in ports) and time.monotonic() < deadline:
        time.sleep(0.02)
    for name in ports + bridges:
        if link_index(name) is not None:
            net.run(None, ["ip", "link", "del", "dev", name], check=False)
    for sw in mn.switches:
        sw.terminate()
    left = [n for n in ports + bridges if link_index(n) is not None]
    if left:
        raise CommandError(f"the teardown left links behind: {', '.join(left)}")
