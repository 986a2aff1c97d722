"""A control path between two hosts, beside the emulated links.

A testbed keeps its tools' control traffic off the links it measures. NetPerfMeter's
control connection (the passive side's port + 1) carries the flows' set-up before the
measurement (a few round trips per flow) and, after it, the passive side's results:
every message it received (6.6 MB for a minute of a 15 Mbit/s flow). Through the
emulated path that upload is shaped like the bottleneck and waits behind whatever its
FIFO still holds: 3.5-6 s a D point, 12 s a C point at 60 flows, none of it measured.

The control path is a veth pair straight between the two hosts' namespaces, without a
qdisc of ours, on link-local addresses of its own (169.254.N.0/30) with fixed MACs and
permanent neighbour entries (no ARP: an ARP request would carry the host's own
address as its source, which a strict rp_filter drops on the veth). Policy rules by TCP
port send the control connection, and nothing else, over it: on the client, packets to
the server's address and port; on the server, packets from that port to the client's
address. The route keeps each host's own address as the source, so the tool sees the
same endpoints as before and its data connections (another port) stay on the emulated
path. Set up before the tool starts; read back with ``ip route get``; gone with the
hosts' namespaces at the teardown, or removed (:meth:`ControlPaths.remove`) when a
sweep's next point reuses the network (:mod:`bufferbloat.net.reuse`).

Needs FIB rules that match a TCP port (Linux and iproute2 >= 4.17).
"""

import ipaddress

from bufferbloat.core.errors import CommandError

#: the veth's name in both namespaces (N: the pair's number in the network)
DEV = "bbctl{n}"
#: the pair's /30: .1 the first host's end, .2 the second's
SUBNET = "169.254.{n}.{h}"
#: the ends' MACs (locally administered): h 1 the first host's, 2 the second's
MAC = "02:bb:00:00:{n:02x}:{h:02x}"
#: routing table and rule preference of the pair (the main table's rules come at 32766)
TABLE_BASE = 1000
RULE_PREF = 1000
MAX_PAIRS = 250
NEEDS = ("policy routing by TCP port (FIB rules with ipproto/dport/sport: Linux and "
         "iproute2 >= 4.17)")


def link_commands(n, peer_pid):
    """``ip -batch`` lines of the pair's first host (``n``: the pair's number): the veth
    (its peer moved into the second host's namespace, by that host's shell's PID), its
    address, up."""
    dev = DEV.format(n=n)
    return [f"link add {dev} address {MAC.format(n=n, h=1)} type veth peer name {dev} "
            f"address {MAC.format(n=n, h=2)} netns {int(peer_pid)}",
            f"address add {SUBNET.format(n=n, h=1)}/30 dev {dev}",
            f"neighbour add {SUBNET.format(n=n, h=2)} lladdr {MAC.format(n=n, h=2)} "
            f"dev {dev} nud permanent",
            f"link set {dev} up"]


def peer_commands(n):
    """``ip -batch`` lines of the pair's second host: its end's address, its peer's
    neighbour entry, up."""
    dev = DEV.format(n=n)
    return [f"address add {SUBNET.format(n=n, h=2)}/30 dev {dev}",
            f"neighbour add {SUBNET.format(n=n, h=1)} lladdr {MAC.format(n=n, h=1)} "
            f"dev {dev} nud permanent",
            f"link set {dev} up"]


def route_command(n, side, own_ip, other_ip):
    """The ``ip -batch`` line of one host of pair ``n`` (``side`` 1 or 2): its table's
    route to the other host over the veth, keeping ``own_ip`` as the source."""
    dev, via = DEV.format(n=n), SUBNET.format(n=n, h=3 - side)
    return f"route add {other_ip}/32 via {via} dev {dev} src {own_ip} table {TABLE_BASE + n}"


def rule_command(n, direction, port, other_ip, verb="add"):
    """The ``ip -batch`` line that sends the control connection's packets of this host
    to ``other_ip`` into the pair's table: ``direction`` 'dport' on the client, 'sport'
    on the server (``verb`` 'del': the line that deletes that rule)."""
    if direction not in ("dport", "sport") or verb not in ("add", "del"):
        raise ValueError(f"direction {direction!r}, verb {verb!r}")
    return (f"rule {verb} to {other_ip}/32 ipproto tcp {direction} {int(port)} "
            f"lookup {TABLE_BASE + n} pref {RULE_PREF}")


def route_get(other_ip, own_ip, direction, port):
    """``ip`` argv asking which way a control packet of this host goes."""
    return ["ip", "-o", "route", "get", other_ip, "from", own_ip, "ipproto", "tcp",
            direction, str(int(port))]


def check_route(text, n, where):
    """Raise unless ``ip route get``'s answer goes out of the pair's veth."""
    dev = DEV.format(n=n)
    if f" dev {dev} " not in f" {text.strip()} ":
        raise CommandError(f"{where}: the control path's rule does not apply (ip route "
                           f"get says {text.strip()!r}, wanted dev {dev}); it needs "
                           f"{NEEDS}")


class ControlPaths:
    """The network's control paths: one veth per pair of hosts, one rule per port."""

    def __init__(self, net):
        self.net = net
        self.pairs = {}      # frozenset({a, b}) -> (n, first host)
        self.rules = {}      # host -> [rule_command's arguments of each rule added there]

    def add(self, client, server, port):
        """Send TCP connections from ``client`` to ``server``:``port`` (both ways) over
        the pair's veth; returns what the record keeps of it."""
        net = self.net
        key = frozenset((client, server))
        fresh = key not in self.pairs
        if fresh and len(self.pairs) >= MAX_PAIRS:
            raise CommandError(f"more than {MAX_PAIRS} control paths")
        n, first = self.pairs[key] if not fresh else (len(self.pairs), client)
        port = int(port)
        if not 0 < port < 65536:
            raise ValueError(f"not a TCP port: {port}")
        # the batch lines carry them: addresses, checked as such
        c_ip, s_ip = (str(ipaddress.IPv4Address(net.ip(h))) for h in (client, server))
        c_side, s_side = (1, 2) if client == first else (2, 1)
        lines = {client: [], server: []}
        if fresh:     # the veth and each side's route, with the pair's first port
            lines[client] += [*link_commands(n, net.net[server].pid),
                              route_command(n, c_side, c_ip, s_ip)]
            lines[server] += [*peer_commands(n), route_command(n, s_side, s_ip, c_ip)]
        rules = {client: (n, "dport", port, s_ip), server: (n, "sport", port, c_ip)}
        for host, rule in rules.items():
            lines[host].append(rule_command(*rule))
        for host in (client, server):
            try:
                net.run(host, ["ip", "-batch", "-"], stdin="\n".join(lines[host]) + "\n")
            except CommandError as exc:
                other = server if host == client else client
                raise CommandError(f"{host}: setting up the control path to {other}: "
                                   f"{exc}; it needs {NEEDS}") from exc
        if fresh:     # the veth and routes exist: a later port of the pair reuses them
            self.pairs[key] = (n, first)
        for host, rule in rules.items():
            self.rules.setdefault(host, []).append(rule)
        check_route(net.run(client, route_get(s_ip, c_ip, "dport", port)), n, client)
        check_route(net.run(server, route_get(c_ip, s_ip, "sport", port)), n, server)
        return {"dev": DEV.format(n=n), "table": TABLE_BASE + n, "port": port,
                "client": client, "server": server}

    def remove(self):
        """Remove every pair's veth (both ends: its addresses, neighbours and routes go
        with it) and every rule added; returns how many pairs there were. One ``ip
        -batch`` per host."""
        lines = {}
        for (n, first) in self.pairs.values():
            lines.setdefault(first, []).append(f"link del {DEV.format(n=n)}")
        for host, rules in self.rules.items():
            lines.setdefault(host, []).extend(rule_command(*r, verb="del") for r in rules)
        for host, batch in sorted(lines.items()):
            self.net.run(host, ["ip", "-batch", "-"], stdin="\n".join(batch) + "\n")
        count = len(self.pairs)
        self.pairs, self.rules = {}, {}
        return count
