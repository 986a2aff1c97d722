"""Qdisc and TCP socket statistics read through raw netlink (no tc, no ss, no pyroute2).

Two readers, each one dump request per call on a socket kept open:

* :class:`QdiscReader`: ``RTM_GETQDISC`` dump (NETLINK_ROUTE) of one device, decoding
  ``TCA_KIND`` and ``TCA_STATS2`` (basic, queue, and the kind's xstats, decoded by the
  ``decoder`` it is given: the qdisc registry, bufferbloat.net.qdiscs, whose kinds'
  modules each decode their own struct). A kind that keeps per-flow state in its classes
  gets an ``RTM_GETTCLASS`` dump of the same device too.
* :class:`TcpReader`: ``SOCK_DIAG_BY_FAMILY`` dump (NETLINK_SOCK_DIAG, inet_diag_req_v2)
  of TCP sockets of one network namespace with ``tcp_info``, the congestion control name
  (INET_DIAG_CONG) and BBR's bw/min_rtt (INET_DIAG_BBRINFO), filtered to destination /
  source ports by in-kernel bytecode (default) or in Python.

A socket of another network namespace is created in a short-lived thread that enters
that namespace (``setns``); the socket stays bound to it for its life. Layouts follow the
kernel's UAPI headers (linux/rtnetlink.h, pkt_sched.h, gen_stats.h, inet_diag.h, tcp.h);
structs shorter than the newest layout (older kernels) are decoded as far as they go.

The parsers (:func:`parse_qdisc_dump`, :func:`parse_class_dump`, :func:`parse_diag_dump`)
take the raw bytes of the kernel's answer, so that they are tested on captured dumps.
"""

import ctypes
import ctypes.util
import os
import socket
import struct
import threading

# ----------------------------------------------------------------- netlink constants
NETLINK_ROUTE = 0
NETLINK_SOCK_DIAG = 4
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
RTM_GETQDISC = 38
RTM_NEWQDISC = 36
RTM_GETTCLASS = 42
RTM_NEWTCLASS = 40
SOCK_DIAG_BY_FAMILY = 20
CLONE_NEWNET = 0x40000000

TCA_KIND, TCA_STATS2 = 1, 7
TCA_STATS_BASIC, TCA_STATS_QUEUE, TCA_STATS_APP, TCA_STATS_PKT64 = 1, 3, 4, 8
TC_H_ROOT = 0xFFFFFFFF
TC_H_INGRESS = 0xFFFFFFF1

INET_DIAG_REQ_BYTECODE = 1
INET_DIAG_INFO, INET_DIAG_VEGASINFO, INET_DIAG_CONG = 2, 3, 4
INET_DIAG_BBRINFO = 16
# ext is a u8: BBR (like Vegas and DCTCP) answers the VEGASINFO bit with its own attribute
DIAG_EXT = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_VEGASINFO - 1)) \
    | (1 << (INET_DIAG_CONG - 1))
BC_JMP, BC_S_EQ, BC_D_EQ = 1, 11, 12

TCP_STATES = {1: "ESTAB", 2: "SYN-SENT", 3: "SYN-RECV", 4: "FIN-WAIT-1", 5: "FIN-WAIT-2",
              6: "TIME-WAIT", 7: "UNCONN", 8: "CLOSE-WAIT", 9: "LAST-ACK", 10: "LISTEN",
              11: "CLOSING", 12: "NEW-SYN-RECV"}
# every state that carries a connection with a tcp_info (not LISTEN, TIME-WAIT, SYN-RECV)
CONN_STATES = sum(1 << s for s in (1, 2, 4, 5, 8, 9, 11))
TCP_INFINITE_SSTHRESH = 0x7FFFFFFF

_NLMSGHDR = struct.Struct("=IHHII")
_NLATTR = struct.Struct("=HH")
_TCMSG = struct.Struct("=BxxxiIII")
_BASIC = struct.Struct("=QI")
_QUEUE = struct.Struct("=IIIII")  # qlen, backlog, drops, requeues, overlimits
_DIAG_REQ = struct.Struct("=BBBxI")  # family, protocol, ext, pad, states (+ 48 B sockid)
_DIAG_MSG = struct.Struct("=BBBB2s2s16s16sIQIIIII")
_BBR = struct.Struct("=IIIII")

# tcp_info offsets (linux/tcp.h); a field past the end of a shorter struct reads as None
_TI_FIELDS = {
    "state": (0, "B"), "snd_mss": (16, "I"), "unacked": (24, "I"),
    "sacked": (28, "I"), "lost": (32, "I"), "retrans": (36, "I"), "rtt": (68, "I"),
    "rttvar": (72, "I"), "snd_ssthresh": (76, "I"), "snd_cwnd": (80, "I"),
    "total_retrans": (100, "I"), "pacing_rate": (104, "Q"), "bytes_acked": (120, "Q"),
    "min_rtt": (148, "I"), "data_segs_out": (156, "I"), "delivery_rate": (160, "Q"),
    "ca_state": (1, "B"), "delivered_ce": (196, "I"), "bytes_sent": (200, "Q"),
    # byte 7, bit 0: tcpi_delivery_rate_app_limited; the chrono statistics (us, Linux
    # >= 4.10): time with data to send (busy, all three chronos), of which limited by
    # the receiver's window and by the send buffer
    "flags7": (7, "B"), "busy_time": (168, "Q"), "rwnd_limited": (176, "Q"),
    "sndbuf_limited": (184, "Q"),
    # bytes written but not yet sent, and bytes retransmitted (Linux >= 4.19): the
    # highest byte sent is bytes_sent - bytes_retrans (docs/reference/one-way-delay.md)
    "notsent_bytes": (144, "I"), "bytes_retrans": (208, "Q")}
_TI_STRUCTS = {k: (off, struct.Struct("=" + f)) for k, (off, f) in _TI_FIELDS.items()}
# the fields the sampler needs, in one unpack when the struct is long enough (>= 208 B,
# Linux >= 4.19)
_TI_MAIN = struct.Struct("=BB5xB8xI4xIIII28xIIII16xIQ8xQ16xII4xIQQQQ4xIQQ")
_TI_MAIN_NAMES = ("state", "ca_state", "flags7", "snd_mss", "unacked", "sacked", "lost",
                  "retrans", "rtt", "rttvar", "snd_ssthresh", "snd_cwnd", "total_retrans",
                  "pacing_rate", "bytes_acked", "notsent_bytes", "min_rtt", "data_segs_out",
                  "delivery_rate", "busy_time", "rwnd_limited", "sndbuf_limited",
                  "delivered_ce", "bytes_sent", "bytes_retrans")


class NetlinkError(OSError):
    """The kernel answered a netlink request with an error."""


# ----------------------------------------------------------------- namespaces
_libc = None


def _setns(fd, nstype):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.setns(fd, nstype) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def in_netns(pid, fn):
    """Call ``fn()`` with the calling context inside the network namespace of ``pid``
    (None: this process's own namespace) and return its result.

    Runs in a short-lived thread (setns changes only the calling thread's namespace), which
    returns to the original namespace before it ends. Sockets created by ``fn`` stay bound
    to the namespace they were created in.
    """
    if pid is None:
        return fn()
    box = {}

    def run():
        fds = []
        try:   # a namespace already gone (its process ended) is the caller's OSError
            fds.append(os.open("/proc/thread-self/ns/net", os.O_RDONLY))
            fds.append(os.open(f"/proc/{int(pid)}/ns/net", os.O_RDONLY))
            _setns(fds[1], CLONE_NEWNET)
            try:
                box["value"] = fn()
            finally:
                _setns(fds[0], CLONE_NEWNET)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            for fd in fds:
                os.close(fd)

    t = threading.Thread(target=run, name=f"netns-{pid}")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


# ----------------------------------------------------------------- socket
class NetlinkSocket:
    """A netlink socket of protocol ``proto`` (in the namespace of ``pid``) that sends dump
    requests and returns the raw answer."""

    def __init__(self, proto, pid=None, rcvbuf=1 << 20):
        self.sock = in_netns(pid, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                                        proto))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind((0, 0))
        self.sock.settimeout(1.0)  # a lost answer must not hang the caller
        self.seq = 0
        self._buf = bytearray(1 << 16)
        self._view = memoryview(self._buf)

    def dump(self, msg_type, payload):
        """Send a dump request; return the concatenated bytes of every answer datagram
        (up to and including NLMSG_DONE)."""
        self.seq += 1
        msg = _NLMSGHDR.pack(16 + len(payload), msg_type, NLM_F_REQUEST | NLM_F_DUMP,
                             self.seq, 0) + payload
        self.sock.send(msg)
        chunks = []
        while True:
            n = self.sock.recv_into(self._buf)
            chunk = bytes(self._view[:n])
            chunks.append(chunk)
            if _ends_dump(chunk, self.seq):
                return b"".join(chunks) if len(chunks) > 1 else chunk

    def request_many(self, msg_type, payloads):
        """Send one (non-dump) request per payload in a single datagram (the kernel
        answers each in turn); return the bytes of the answers (data or error messages),
        as many as requests, or what came within the socket's timeout."""
        first = self.seq + 1
        self.seq += len(payloads)
        hdr = _NLMSGHDR.pack
        self.sock.send(b"".join(hdr(16 + len(p), msg_type, NLM_F_REQUEST, first + i, 0) + p
                                for i, p in enumerate(payloads)))
        chunks, want = [], len(payloads)
        while want > 0:
            try:
                n = self.sock.recv_into(self._buf)
            except socket.timeout:
                break
            chunk = bytes(self._view[:n])
            off = 0
            while off + 16 <= n:
                length, _t, _f, mseq, _p = _NLMSGHDR.unpack_from(chunk, off)
                if length < 16:
                    break
                if first <= mseq <= self.seq:
                    want -= 1
                off += (length + 3) & ~3
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self):
        """Close the socket."""
        self.sock.close()


def _ends_dump(data, seq):
    off, end = 0, len(data)
    while off + 16 <= end:
        length, mtype, _flags, mseq, _pid = _NLMSGHDR.unpack_from(data, off)
        if mseq == seq and mtype in (NLMSG_DONE, NLMSG_ERROR):
            return True
        if length < 16:
            return True
        off += (length + 3) & ~3
    return False


def iter_messages(data, errors=True):
    """Yield (type, body offset, body end) of every netlink message in ``data``; raise
    :class:`NetlinkError` on an error message (skip it if not ``errors``)."""
    off, end = 0, len(data)
    while off + 16 <= end:
        length, mtype, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
        if length < 16:
            break
        if mtype == NLMSG_DONE:
            return
        if mtype == NLMSG_ERROR:
            err = struct.unpack_from("=i", data, off + 16)[0]
            if err and errors:
                raise NetlinkError(-err, os.strerror(-err))
        else:
            yield mtype, off + 16, off + length
        off += (length + 3) & ~3


def iter_attrs(data, off, end):
    """Yield (type, value offset, value end) of the netlink attributes in data[off:end]."""
    while off + 4 <= end:
        alen, atype = _NLATTR.unpack_from(data, off)
        if alen < 4:
            break
        yield atype & 0x3FFF, off + 4, off + alen
        off += (alen + 3) & ~3


# ----------------------------------------------------------------- qdiscs
def tc_handle(h):
    """A tc handle as tc prints it: ``1:``, ``1:1``, ``root``."""
    if h == TC_H_ROOT:
        return "root"
    if h == TC_H_INGRESS:
        return "ingress"
    maj, mnr = h >> 16, h & 0xFFFF
    return f"{maj:x}:" if not mnr else f"{maj:x}:{mnr:x}"


def qdisc_request(ifindex):
    """Body of an RTM_GETQDISC/RTM_GETTCLASS dump request for ``ifindex``."""
    return _TCMSG.pack(socket.AF_UNSPEC, ifindex, 0, 0, 0)


def _tc_entry(data, off, end):
    _fam, ifindex, handle, parent, _info = _TCMSG.unpack_from(data, off)
    q = {"ifindex": ifindex, "handle": handle, "parent": parent, "kind": None}
    for atype, a, b in iter_attrs(data, off + _TCMSG.size, end):
        if atype == TCA_KIND:
            q["kind"] = data[a:b].rstrip(b"\0").decode()
        elif atype == TCA_STATS2:
            for stype, sa, sb in iter_attrs(data, a, b):
                if stype == TCA_STATS_BASIC and sb - sa >= 12:
                    q["bytes"], q["packets"] = _BASIC.unpack_from(data, sa)
                elif stype == TCA_STATS_PKT64 and sb - sa >= 8:
                    q["packets"] = struct.unpack_from("=Q", data, sa)[0]
                elif stype == TCA_STATS_QUEUE and sb - sa >= 20:
                    (q["qlen"], q["backlog"], q["drops"], q["requeues"],
                     q["overlimits"]) = _QUEUE.unpack_from(data, sa)
                elif stype == TCA_STATS_APP:
                    q["xstats"] = bytes(data[sa:sb])
    return q


def parse_qdisc_dump(data, ifindex=None, decode=None):
    """Qdiscs in an RTM_GETQDISC dump answer (of ``ifindex`` only, when given).

    Each is a dict: ifindex, handle, parent (u32), kind, bytes, packets, qlen, backlog,
    drops, requeues, overlimits, and ``decode(kind, xstats bytes)`` merged in (the qdisc
    registry's ``decode_xstats``); without ``decode`` the raw bytes stay as ``xstats``.
    """
    return list(_entries(data, ifindex, RTM_NEWQDISC, decode))


def parse_class_dump(data, ifindex=None, decode=None):
    """Classes in an RTM_GETTCLASS dump answer, as :func:`parse_qdisc_dump` decodes
    qdiscs (``decode``: the registry's ``decode_class_xstats``)."""
    return list(_entries(data, ifindex, RTM_NEWTCLASS, decode))


def _entries(data, ifindex, want, decode):
    for mtype, off, end in iter_messages(data):
        if mtype != want:
            continue
        if ifindex is not None and _TCMSG.unpack_from(data, off)[1] != ifindex:
            continue
        q = _tc_entry(data, off, end)
        if decode is not None:
            q.update(decode(q["kind"], q.pop("xstats", None)))
        yield q


class QdiscReader:
    """Reads every qdisc of device ``dev`` in the network namespace of ``pid`` (None: this
    process's) with one RTM_GETQDISC dump per :meth:`read`. ``decoder``: the qdisc
    registry (bufferbloat.net.qdiscs: ``decode_xstats``, ``decode_class_xstats``,
    ``needs_classes``, ``finish_qdiscs``); None leaves xstats raw. ``classes``: dump the
    classes of a kind that keeps per-flow state there."""

    def __init__(self, dev, pid=None, decoder=None, classes=True):
        self.dev, self.pid = dev, pid
        self.ifindex = in_netns(pid, lambda: socket.if_nametoindex(dev))
        self.nl = NetlinkSocket(NETLINK_ROUTE, pid)
        self._req = qdisc_request(self.ifindex)
        self.decoder = decoder
        self.classes = classes

    def read_raw(self):
        """The raw dump answer (bytes)."""
        return self.nl.dump(RTM_GETQDISC, self._req)

    def read(self):
        """List of decoded qdicts of the device (see :func:`parse_qdisc_dump`), finished
        by the decoder (derived fields, per-flow classes merged, extra rows added)."""
        dec = self.decoder
        qs = parse_qdisc_dump(self.read_raw(), self.ifindex,
                              dec.decode_xstats if dec else None)
        if dec is None:
            return qs
        classes = None
        if self.classes and dec.needs_classes(qs):
            classes = parse_class_dump(self.nl.dump(RTM_GETTCLASS, self._req), self.ifindex,
                                       dec.decode_class_xstats)
        return dec.finish_qdiscs(qs, classes)

    def close(self):
        """Close the socket."""
        self.nl.close()


# ----------------------------------------------------------------- TCP sockets
def port_bytecode(dports=(), sports=()):
    """inet_diag bytecode accepting a socket whose destination port is in ``dports`` or
    whose source port is in ``sports`` (empty: accept everything -> b'').

    The kernel's audit follows every op's ``yes`` jump and wants every ``no`` target on
    that chain, so an OR is laid out as ss does: a test falls through on a match to a JMP
    that leaves (accept), and jumps over that JMP to the next test on a mismatch; the
    last test's mismatch jumps 4 bytes past the end (reject).
    """
    tests = [(BC_D_EQ, p) for p in sorted(set(dports))] + \
        [(BC_S_EQ, p) for p in sorted(set(sports))]
    if not tests:
        return b""
    total = 12 * len(tests) - 4
    ops = []
    for i, (code, port) in enumerate(tests):
        ops.append(struct.pack("=BBH", code, 8, 12) + struct.pack("=BBH", 0, 0, port))
        if i < len(tests) - 1:
            rest = total - 12 * i - 8  # bytes from this JMP to the end
            ops.append(struct.pack("=BBH", BC_JMP, 4, rest))
    return b"".join(ops)


def diag_request(family=socket.AF_INET, states=CONN_STATES, bytecode=b""):
    """Body of a SOCK_DIAG_BY_FAMILY TCP dump request asking for tcp_info, the congestion
    control's name and its info; ``bytecode`` as from :func:`port_bytecode`."""
    body = _DIAG_REQ.pack(family, socket.IPPROTO_TCP, DIAG_EXT, states) + bytes(48)
    if bytecode:
        body += _NLATTR.pack(4 + len(bytecode), INET_DIAG_REQ_BYTECODE) + bytecode
    return body


def decode_tcp_info(buf):
    """Fields of a tcp_info (see _TI_FIELDS); those past the end of a short struct: None."""
    n = len(buf)
    if n >= _TI_MAIN.size:
        return dict(zip(_TI_MAIN_NAMES, _TI_MAIN.unpack_from(buf)))
    out = {}
    for k, (off, st) in _TI_STRUCTS.items():
        out[k] = st.unpack_from(buf, off)[0] if off + st.size <= n else None
    return out


def parse_diag_dump(data, dports=None, sports=None):
    """TCP sockets in a SOCK_DIAG_BY_FAMILY dump answer, filtered in Python to
    ``dports``/``sports`` (sets; None: no filter). Each is a dict: family, state (ss
    name), src, sport, dst, dport, cookie, inode, id (the raw inet_diag_sockid), cca, info (see :func:`decode_tcp_info`),
    bbr_bw_Bps, bbr_min_rtt_us."""
    out = []
    for mtype, off, end in iter_messages(data, errors=False):
        if mtype != SOCK_DIAG_BY_FAMILY:
            continue
        (fam, state, _timer, _retrans, sport, dport, src, dst, _if, cookie, _exp, _rq, _wq,
         _uid, inode) = _DIAG_MSG.unpack_from(data, off)
        sport = int.from_bytes(sport, "big")
        dport = int.from_bytes(dport, "big")
        if dports is not None or sports is not None:
            if not ((dports and dport in dports) or (sports and sport in sports)):
                continue
        s = {"family": fam, "state": TCP_STATES.get(state, str(state)), "sport": sport,
             "dport": dport, "src": _addr(fam, src), "dst": _addr(fam, dst),
             "cookie": cookie, "inode": inode, "id": data[off + 4:off + 52], "cca": None, "info": None,
             "bbr_bw_Bps": None, "bbr_min_rtt_us": None}
        for atype, a, b in iter_attrs(data, off + _DIAG_MSG.size, end):
            if atype == INET_DIAG_INFO:
                s["info"] = decode_tcp_info(data[a:b])
            elif atype == INET_DIAG_CONG:
                s["cca"] = data[a:b].split(b"\0", 1)[0].decode()
            elif atype == INET_DIAG_BBRINFO and b - a >= 12:
                lo, hi, min_rtt = struct.unpack_from("=III", data, a)
                s["bbr_bw_Bps"] = (hi << 32) | lo
                s["bbr_min_rtt_us"] = min_rtt
        out.append(s)
    return out


_V4_MAPPED = bytes(10) + b"\xff\xff"


def _addr(fam, raw):
    """The address as text; an IPv4-mapped IPv6 one (``::ffff:a.b.c.d``, a dual-stack
    socket's view of an IPv4 peer) as the IPv4 address it is."""
    if fam == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[:4])
    if raw[:12] == _V4_MAPPED:
        return socket.inet_ntop(socket.AF_INET, raw[12:16])
    return socket.inet_ntop(socket.AF_INET6, raw)


def in_flight_pkts(info):
    """Packets in flight as the kernel counts them: unacked - sacked - lost + retrans."""
    return info["unacked"] - info["sacked"] - info["lost"] + info["retrans"]


def exact_request(family, sockid):
    """Body of a SOCK_DIAG_BY_FAMILY request for the one socket ``sockid`` (the raw 48-byte
    inet_diag_sockid from a dump: ports, addresses, interface, cookie)."""
    return _DIAG_REQ.pack(family, socket.IPPROTO_TCP, DIAG_EXT, 0xFFFFFFFF) + sockid


class TcpReader:
    """Reads the TCP sockets of the network namespace of ``pid`` (None: this process's)
    whose destination port is in ``dports`` or source port in ``sports``.

    A dump walks the kernel's whole established-hash table (262 144 buckets on a 24 GiB
    host: ~0.2 ms of kernel time, whatever the number of sockets), an exact lookup by
    socket id is a hash lookup. So :meth:`read` dumps at most every ``discover_s`` (to
    find new sockets) and otherwise asks for the sockets it knows by exact lookup, all
    requests in one datagram. ``discover_s=0``: dump every time.

    filter: 'bytecode' (the dump's port filter runs in the kernel; default) or 'python'
    (full dump, filtered here). families: address families (default IPv4 only).
    """

    def __init__(self, pid=None, dports=(), sports=(), filter="bytecode",
                 families=(socket.AF_INET,), discover_s=0.0):
        if filter not in ("bytecode", "python"):
            raise ValueError(f"filter must be 'bytecode' or 'python', not {filter!r}")
        self.pid, self.filter, self.discover_s = pid, filter, discover_s
        self.dports, self.sports = set(dports), set(sports)
        self.nl = NetlinkSocket(NETLINK_SOCK_DIAG, pid)
        bc = port_bytecode(self.dports, self.sports) if filter == "bytecode" else b""
        self._reqs = [diag_request(f, bytecode=bc) for f in families]
        self.known = {}  # cookie -> exact request body
        self._next_dump = 0.0
        self.dumps = self.lookups = 0

    def answers(self):
        """The raw dump answers (bytes), one per family: each ends with its own
        NLMSG_DONE, so each is parsed on its own."""
        return [self.nl.dump(SOCK_DIAG_BY_FAMILY, r) for r in self._reqs]

    def read_raw(self):
        """The raw dump answers concatenated (one family: its answer, as captured for
        the parser fixtures)."""
        return b"".join(self.answers())

    def dump(self):
        """All matching sockets, by dump; they become the known sockets."""
        answers = self.answers()
        self.dumps += 1
        ports = ((self.dports, self.sports)
                 if self.filter == "python" and (self.dports or self.sports) else ())
        socks = [s for data in answers for s in parse_diag_dump(data, *ports)]
        self.known = {s["cookie"]: exact_request(s["family"], s["id"]) for s in socks
                      if s["state"] != "TIME-WAIT"}
        return socks

    def read(self, now=None):
        """List of decoded sockets (see :func:`parse_diag_dump`): by dump when one is due
        (every ``discover_s``; ``now`` in time.monotonic() seconds), else the known
        sockets by exact lookup (those gone since are dropped)."""
        if not self.discover_s or now is None or now >= self._next_dump or not self.known:
            if now is not None:
                self._next_dump = now + self.discover_s
            return self.dump()
        self.lookups += 1
        socks = parse_diag_dump(self.nl.request_many(SOCK_DIAG_BY_FAMILY,
                                                     list(self.known.values())))
        if len(socks) < len(self.known):
            alive = {s["cookie"] for s in socks}
            self.known = {c: r for c, r in self.known.items() if c in alive}
        return [s for s in socks if s["state"] in _WANTED_STATES]

    def close(self):
        """Close the socket."""
        self.nl.close()


_WANTED_STATES = {TCP_STATES[i] for i in range(1, 13) if CONN_STATES >> i & 1}
