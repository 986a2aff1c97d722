"""The emulated links' interfaces: their names, and their segmentation offloads.

Each link of the topology joins an interface at each end; :func:`link_interfaces` names
them as Mininet made them, :func:`planned_root_links` names the root-namespace ones
before Mininet makes them (for the state file). :func:`offloads_off` turns TSO/GSO/GRO
off on an interface, so that a "packet" is one MTU frame and not a 32 KB GSO
super-packet; it takes no process: ethtool's ioctl is made in this process, with its
thread inside the interface's namespace (:mod:`bufferbloat.netlink.nsconfig`).
"""

from bufferbloat.core.errors import CommandError
from bufferbloat.netlink import nsconfig

OFFLOADS = ("tso", "gso", "gro")


def offloads_off(net, ns, dev):
    """Turn TSO/GSO/GRO off on ``dev`` of namespace ``ns`` (None: the root namespace) of
    a :class:`~bufferbloat.net.network.Network` ``net`` (every feature bit ``ethtool -K
    DEV tso off gso off gro off`` clears) and verify it."""
    try:
        left = net.in_ns(ns, nsconfig.offloads_off, dev, OFFLOADS)
    except (OSError, ValueError) as exc:
        raise CommandError(f"{_where(ns)}: {getattr(exc, 'strerror', None) or exc}"
                           ) from None
    if left:
        raise CommandError(f"{_where(ns)}: {dev}: " + "; ".join(
            f"{o} is still on ({', '.join(names)})" for o, names in left.items()))


def _where(ns):
    return "root namespace" if ns is None else ns


def link_interfaces(mn, topo):
    """{(a, b): (interface at a, interface at b)} of each of ``topo``'s links
    (``link_specs``) in the built Mininet network ``mn``, in the topology's order."""
    out = {}
    for spec in topo.link_specs:
        link = mn.linksBetween(mn[spec.a], mn[spec.b])[0]
        i1, i2 = link.intf1, link.intf2
        if i1.node.name != spec.a:
            i1, i2 = i2, i1
        out[(spec.a, spec.b)] = (i1.name, i2.name)
    return out


def planned_root_links(topo):
    """Names of the root-namespace links the build of ``topo`` will create: each switch
    (a bridge) and its ports (Mininet numbers a switch's ports from 1)."""
    degree = {}
    for a, b in topo.links():
        for n in (a, b):
            degree[n] = degree.get(n, 0) + 1
    names = []
    for sw in topo.switches():
        names.append(sw)
        names += [f"{sw}-eth{i}" for i in range(1, degree.get(sw, 0) + 1)]
    return names
