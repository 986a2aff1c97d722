"""What an earlier point left in a network namespace, removed and counted in this process.

A network kept between a sweep's points (:mod:`bufferbloat.net.reuse`) must start the
next point as a fresh one would. These functions run with the calling thread inside a
host's namespace (through ``Network.in_ns``, :func:`bufferbloat.netlink.nlstats.in_netns`)
and take no tool process:

* sockets: every TCP and UDP socket (IPv4 and IPv6, any state: TIME-WAIT and orphans
  still sending included) dumped through sock_diag and destroyed (``SOCK_DESTROY``, as
  ``ss -K`` does; the kernel needs CONFIG_INET_DIAG_DESTROY), then dumped again;
* the TCP metrics cache (ssthresh, RTT remembered per destination): flushed through its
  generic netlink family (``ip tcp_metrics flush all``), then dumped again;
* neighbours: every entry that is neither permanent nor NOARP deleted (RTM_DELNEIGH, as
  ``ip neigh flush all``), then dumped again;
* the route cache (IPv4 next-hop exceptions, IPv6 cached routes): flushed through
  /proc/sys (``ip route flush cache``);
* the IPv4 routes, each interface's counters and the listening TCP ports read from
  /proc/thread-self/net (the calling thread's namespace, not the process's); the IPv4
  policy rules dumped through rtnetlink (``ip rule show``).
"""

import errno
import os
import socket
import struct

from bufferbloat.netlink.nlstats import (
    NETLINK_ROUTE,
    NETLINK_SOCK_DIAG,
    NLMSG_ERROR,
    SOCK_DIAG_BY_FAMILY,
    NetlinkSocket,
    iter_attrs,
    iter_messages,
    parse_diag_dump,
)

NETLINK_GENERIC = 16
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
SOCK_DESTROY = 21
RTM_DELNEIGH, RTM_GETNEIGH = 29, 30
RTM_NEWRULE, RTM_GETRULE = 32, 34
FRA_DST, FRA_PRIORITY, FRA_TABLE = 1, 6, 15
FRA_IP_PROTO, FRA_SPORT_RANGE, FRA_DPORT_RANGE = 22, 23, 24
NUD_NOARP, NUD_PERMANENT = 0x40, 0x80
NDA_DST = 1
GENL_ID_CTRL, CTRL_CMD_GETFAMILY = 0x10, 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 1, 2
TCP_METRICS_CMD_GET, TCP_METRICS_CMD_DEL = 1, 2
_HDR = struct.Struct("=IHHII")
_ATTR = struct.Struct("=HH")
_NDMSG = struct.Struct("=BxxxiHBB")
_DIAG_REQ = struct.Struct("=BBBxI")
_GENL = struct.Struct("=BBxx")
#: struct fib_rule_hdr: family, dst_len, src_len, tos, table, 2 reserved, action; flags
_RULE = struct.Struct("=BBBBBxxBI")
#: the (family, protocol) pairs whose sockets are dumped and destroyed
SOCKET_KINDS = tuple((fam, proto) for fam in (socket.AF_INET, socket.AF_INET6)
                     for proto in (socket.IPPROTO_TCP, socket.IPPROTO_UDP))


def _request(sock, msg_type, body, flags=NLM_F_REQUEST | NLM_F_ACK, seq=1):
    """Send one request and return its errno (0: acknowledged)."""
    sock.send(_HDR.pack(16 + len(body), msg_type, flags, seq, 0) + body)
    while True:
        data = sock.recv(65536)
        off = 0
        while off + 16 <= len(data):
            length, mtype, _f, mseq, _p = _HDR.unpack_from(data, off)
            if length < 16:
                break
            if mtype == NLMSG_ERROR and mseq == seq:
                return -struct.unpack_from("=i", data, off + 16)[0]
            off += (length + 3) & ~3


def _attr(atype, payload):
    n = 4 + len(payload)
    return _ATTR.pack(n, atype) + payload + b"\0" * ((4 - n % 4) % 4)


def _sockets(nl):
    """[(family, protocol, socket dict)] of every TCP and UDP socket of the namespace."""
    out = []
    for fam, proto in SOCKET_KINDS:
        body = _DIAG_REQ.pack(fam, proto, 0, 0xFFFFFFFF) + bytes(48)
        out += [(fam, proto, s) for s in parse_diag_dump(nl.dump(SOCK_DIAG_BY_FAMILY, body))]
    return out


def _label(proto, s):
    kind = "tcp" if proto == socket.IPPROTO_TCP else "udp"
    return f"{kind} {s['state']} {s['src']}:{s['sport']}->{s['dst']}:{s['dport']}"


def destroy_sockets():
    """Destroy every TCP and UDP socket of this namespace. Returns (how many were
    destroyed, [what is left, as text]); a socket the kernel refuses to destroy (no
    CONFIG_INET_DIAG_DESTROY) is left, and named."""
    nl = NetlinkSocket(NETLINK_SOCK_DIAG)
    try:
        destroyed = 0
        for fam, proto, s in _sockets(nl):
            body = _DIAG_REQ.pack(fam, proto, 0, 0xFFFFFFFF) + bytes(s["id"])
            err = _request(nl.sock, SOCK_DESTROY, body)
            if err == 0:
                destroyed += 1
        left = [_label(proto, s) for _, proto, s in _sockets(nl)]
    finally:
        nl.close()
    return destroyed, left


def _neighbours(nl):
    """[(family, ifindex, state, dst bytes)] of the namespace's neighbour entries."""
    out = []
    data = nl.dump(RTM_GETNEIGH, _NDMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
    for mtype, off, end in iter_messages(data, errors=False):
        if mtype != 28:                      # RTM_NEWNEIGH
            continue
        fam, ifindex, state, _flags, _type = _NDMSG.unpack_from(data, off)
        dst = next((data[a:b] for t, a, b in iter_attrs(data, off + _NDMSG.size, end)
                    if t == NDA_DST), None)
        out.append((fam, ifindex, state, dst))
    return out


def flush_neighbours():
    """Delete every neighbour entry that is neither permanent nor NOARP (what a fresh
    namespace has none of). Returns (how many were deleted, [what is left])."""
    nl = NetlinkSocket(NETLINK_ROUTE)
    try:
        flushed = 0
        for fam, ifindex, state, dst in _neighbours(nl):
            if state & (NUD_NOARP | NUD_PERMANENT) or dst is None:
                continue
            body = _NDMSG.pack(fam, ifindex, 0, 0, 0) + _attr(NDA_DST, dst)
            if _request(nl.sock, RTM_DELNEIGH, body) in (0, errno.ENOENT):
                flushed += 1
        left = [f"{socket.inet_ntop(fam, dst)} on ifindex {ifindex} (state {state:#x})"
                for fam, ifindex, state, dst in _neighbours(nl)
                if dst is not None and not state & (NUD_NOARP | NUD_PERMANENT)]
    finally:
        nl.close()
    return flushed, left


def _tcp_metrics_family(sock):
    """The generic netlink family id of ``tcp_metrics``."""
    body = _GENL.pack(CTRL_CMD_GETFAMILY, 1) + _attr(CTRL_ATTR_FAMILY_NAME, b"tcp_metrics\0")
    sock.send(_HDR.pack(16 + len(body), GENL_ID_CTRL, NLM_F_REQUEST, 1, 0) + body)
    data = sock.recv(65536)
    for _mtype, off, end in iter_messages(data):
        for atype, a, _b in iter_attrs(data, off + _GENL.size, end):
            if atype == CTRL_ATTR_FAMILY_ID:
                return struct.unpack_from("=H", data, a)[0]
    raise OSError(errno.ENOENT, "no tcp_metrics generic netlink family")


def flush_tcp_metrics():
    """Flush the namespace's TCP metrics cache. Returns (entries before, entries
    after); raises OSError when the kernel refuses."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    try:
        sock.settimeout(2.0)
        sock.bind((0, 0))
        family = _tcp_metrics_family(sock)
        before = _count_metrics(sock, family)
        err = _request(sock, family, _GENL.pack(TCP_METRICS_CMD_DEL, 1), seq=3)
        if err:
            raise OSError(err, f"flushing the TCP metrics cache: {os.strerror(err)}")
        return before, _count_metrics(sock, family)
    finally:
        sock.close()


def _count_metrics(sock, family, seq=2):
    body = _GENL.pack(TCP_METRICS_CMD_GET, 1)
    sock.send(_HDR.pack(16 + len(body), family, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)
    n = 0
    while True:
        data = sock.recv(1 << 16)
        done = False
        for mtype, _off, _end in iter_messages(data):
            n += mtype == family
        off = 0
        while off + 16 <= len(data):
            length, mtype, _f, _s, _p = _HDR.unpack_from(data, off)
            done = done or mtype in (3, NLMSG_ERROR) or length < 16
            if length < 16:
                break
            off += (length + 3) & ~3
        if done:
            return n


def clean():
    """Everything above, in this order, in one call: every socket destroyed, the TCP
    metrics cache flushed, neighbours deleted, the route cache flushed; then the
    namespace's layout read. Returns {sockets_destroyed, sockets_left,
    tcp_metrics_flushed, tcp_metrics_left, neighbours_flushed, neighbours_left, layout}
    (what is left: lists of text, empty when clean; layout: :func:`layout`)."""
    destroyed, sockets = destroy_sockets()
    before, after = flush_tcp_metrics()
    flushed, neighbours = flush_neighbours()
    flush_route_cache()
    return {"sockets_destroyed": destroyed, "sockets_left": sockets,
            "tcp_metrics_flushed": before,
            "tcp_metrics_left": [f"{after} entries"] if after else [],
            "neighbours_flushed": flushed, "neighbours_left": neighbours,
            "layout": layout()}


def layout():
    """What a fresh build gave this namespace and a kept network must still have:
    {"routes": :func:`ipv4_routes`, "rules": :func:`ipv4_rules`, "devices": the
    interfaces' names, sorted}."""
    return {"routes": ipv4_routes(), "rules": ipv4_rules(),
            "devices": sorted(interface_counters())}


def ipv4_rules():
    """The namespace's IPv4 policy rules (``ip rule show``), each as text: its
    preference, its table, and its destination, protocol and ports when it has them;
    sorted."""
    nl = NetlinkSocket(NETLINK_ROUTE)
    try:
        data = nl.dump(RTM_GETRULE, _RULE.pack(socket.AF_INET, 0, 0, 0, 0, 0, 0))
    finally:
        nl.close()
    out = []
    for mtype, off, end in iter_messages(data, errors=False):
        if mtype != RTM_NEWRULE:
            continue
        _fam, dst_len, _src_len, _tos, table, _action, _flags = _RULE.unpack_from(data, off)
        attrs = {t: data[a:b] for t, a, b in iter_attrs(data, off + _RULE.size, end)}
        if FRA_TABLE in attrs:
            table = struct.unpack_from("=I", attrs[FRA_TABLE])[0]
        pref = struct.unpack_from("=I", attrs[FRA_PRIORITY])[0] if FRA_PRIORITY in attrs else 0
        text = f"pref {pref} table {table}"
        if FRA_DST in attrs:
            text += f" to {socket.inet_ntop(socket.AF_INET, attrs[FRA_DST])}/{dst_len}"
        if FRA_IP_PROTO in attrs:
            text += f" ipproto {attrs[FRA_IP_PROTO][0]}"
        for key, name in ((FRA_SPORT_RANGE, "sport"), (FRA_DPORT_RANGE, "dport")):
            if key in attrs:
                lo, hi = struct.unpack_from("=HH", attrs[key])
                text += f" {name} {lo}" + (f"-{hi}" if hi != lo else "")
        out.append(text)
    return sorted(out)


def flush_route_cache():
    """Flush the IPv4 next-hop exceptions and the IPv6 cached routes (``ip route flush
    cache``); IPv6 only where the namespace has it."""
    for path in ("/proc/sys/net/ipv4/route/flush", "/proc/sys/net/ipv6/route/flush"):
        try:
            with open(path, "w") as f:
                f.write("1\n")
        except FileNotFoundError:
            if "ipv4" in path:
                raise


def ipv4_routes():
    """The namespace's IPv4 routes of the main table, as /proc/net/route lists them
    (without the use counter, which every lookup moves)."""
    with open("/proc/thread-self/net/route") as f:
        rows = [line.split() for line in f.read().splitlines()[1:] if line.strip()]
    return sorted(" ".join(r[:5] + r[6:]) for r in rows)


def interface_counters(devs=None):
    """{device: {rx_bytes, rx_packets, rx_drop, tx_bytes, tx_packets, tx_drop}} of this
    namespace's interfaces (``devs`` only, when given), from /proc/thread-self/net/dev."""
    with open("/proc/thread-self/net/dev") as f:
        lines = f.read().splitlines()[2:]
    out = {}
    for line in lines:
        name, _, rest = line.partition(":")
        name = name.strip()
        if devs is not None and name not in devs:
            continue
        v = [int(x) for x in rest.split()]
        out[name] = {"rx_bytes": v[0], "rx_packets": v[1], "rx_drop": v[3],
                     "tx_bytes": v[8], "tx_packets": v[9], "tx_drop": v[11]}
    return out


def listening_ports():
    """The TCP ports something listens on in this namespace (IPv4 and IPv6), from
    /proc/thread-self/net/tcp{,6}: what ``ss -Hltn`` lists, without its process."""
    ports = set()
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/thread-self/net/{name}") as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == "0A":          # TCP_LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports
