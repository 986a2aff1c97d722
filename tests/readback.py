"""Read a built network back from the kernel, and what it should hold, computed here.

Shared by tests/vm/test_readback_vm.py (every qdisc kind, netem) and
tests/host/test_readback_host.py (HTB, FIFO, sysctls, CCAs: what the host kernel has).

What is read, and how (none of it through the project's own conversions):

* qdisc options: ``tc -j -d qdisc show dev DEV`` in the device's namespace (iproute2 6.1
  prints times as the kernel's microseconds, sizes as bytes, RED's max_P as a fraction,
  netem's delay in seconds and its loss as a fraction); a kind tc has no parser for (the
  project's PI) straight from an RTM_GETQDISC dump: its TCA_OPTIONS, u32 each;
* HTB classes: an RTM_GETTCLASS dump, TCA_HTB_PARMS (struct tc_htb_opt): the rate and
  ceil in bytes/s, the burst and cburst as the kernel keeps them, in psched ticks of
  64 ns (PSCHED_SHIFT 6): bytes = ticks * 64 ns * rate;
* a host's sysctls: /proc/sys opened by a thread inside the host's namespace;
* a TCP socket's congestion control and ECN: a connection opened from a sender's
  namespace to the receiver's across the emulated links, ``getsockopt`` TCP_CONGESTION
  and TCP_INFO's tcpi_options, and ``ss -tin`` in the sender's namespace.

Expected values are computed from the configuration with the kernel's and tc's own
documented arithmetic written out here (CoDel's 1024 ns time unit, PIE's tupdate in
jiffies, tc's RED Wlog/Scell_log evaluation, tc's HTB default burst), never by calling
the project's tc argument builders or its scaling helpers.
"""

import json
import math
import os
import socket
import struct

from bufferbloat.netlink.nlstats import (
    NETLINK_ROUTE,
    RTM_GETQDISC,
    RTM_GETTCLASS,
    RTM_NEWQDISC,
    RTM_NEWTCLASS,
    NetlinkSocket,
    in_netns,
    iter_attrs,
    iter_messages,
    qdisc_request,
)

TCA_KIND, TCA_OPTIONS = 1, 2
TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64 = 1, 6, 7
_TCMSG = struct.Struct("=BxxxiIII")
# struct tc_htb_opt: tc_ratespec rate, ceil (cell_log, linklayer, overhead, cell_align,
# mpu, rate), buffer, cbuffer, quantum, level, prio
_HTB_OPT = struct.Struct("=BBHhHI BBHhHI IIIII")
PSCHED_TICK_NS = 64
#: tc's HTB default when no burst is given: rate / HZ (psched's, 1e9 with hrtimers) plus
#: its mtu of 1600 bytes (tc/q_htb.c)
TC_HTB_MTU = 1600
#: bottleneck.py's documented plain leaf (a link without impairment) and netem limit
HOST_QUEUE_PKTS = 10_000
NETEM_LIMIT_PKTS = 100_000
#: the burst rule documented in bottleneck.py / docs/design/health.md: HTB_BURST_MS of the rate,
#: at least 1600 B, at most 64 KiB (under TCG, or when the environment sets a time)
BURST_MS_TCG = 20.0
BURST_MIN, BURST_MAX = 1600, 64 * 1024
BURST_ENV = "BUFFERBLOAT_HTB_BURST_MS"

TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCPI_OPT_TIMESTAMPS, TCPI_OPT_ECN = 1, 8
TCP_TIMESTAMP_OPTION_BYTES = 12


# ------------------------------------------------------------------ namespaces
def pid_of(net, ns):
    """The PID whose network namespace is ``ns`` (None: this process's)."""
    return None if ns is None else net.net[ns].pid


def sysctls(net, host, keys):
    """{key: value} read from /proc/sys inside ``host``'s namespace (white space single);
    a key the namespace lacks is missing."""
    def read():
        out = {}
        for key in keys:
            try:
                with open("/proc/sys/" + key.replace(".", "/")) as f:
                    out[key] = " ".join(f.read().split())
            except OSError:
                pass
        return out
    return in_netns(pid_of(net, host), read)


def psched():
    """(t2us, us2t, clock_res, hz) of /proc/net/psched, as tc reads them."""
    with open("/proc/net/psched") as f:
        return tuple(int(w, 16) for w in f.read().split()[:4])


def tc_tick_in_usec():
    """tc's ticks per microsecond (tc_core_init): t2us/us2t * clock_res/1e6."""
    t2us, us2t, clock_res, _hz = psched()
    if clock_res == 1_000_000_000:
        t2us = us2t
    return t2us / us2t * (clock_res / 1e6)


# ------------------------------------------------------------------ tc and netlink
def tc_qdiscs(net, ns, dev):
    """``tc -j -s -d qdisc show dev DEV`` in ``ns``, parsed (a kind tc cannot parse shows
    its options as ``{"unparsed_by_tc_bytes": N}``)."""
    from bufferbloat.net.qdiscplan import tc_json_fixed  # noqa: PLC0415 - JSON repair only
    out = net.run(ns, ["tc", "-j", "-s", "-d", "qdisc", "show", "dev", dev])
    return json.loads(tc_json_fixed(out) or "[]")


def _dump(net, ns, dev, request, answer):
    pid = pid_of(net, ns)
    ifindex = in_netns(pid, lambda: socket.if_nametoindex(dev))
    nl = NetlinkSocket(NETLINK_ROUTE, pid)
    try:
        data = nl.dump(request, qdisc_request(ifindex))
    finally:
        nl.close()
    out = []
    for mtype, off, end in iter_messages(data):
        if mtype != answer:
            continue
        _fam, index, handle, parent, _info = _TCMSG.unpack_from(data, off)
        if index != ifindex:
            continue
        entry = {"handle": handle, "parent": parent, "kind": None, "options": {}}
        for atype, a, b in iter_attrs(data, off + _TCMSG.size, end):
            if atype == TCA_KIND:
                entry["kind"] = data[a:b].rstrip(b"\0").decode()
            elif atype == TCA_OPTIONS:
                entry["options"] = {t: bytes(data[x:y]) for t, x, y in iter_attrs(data, a, b)}
        out.append(entry)
    return out


def handle(text):
    """``1:1`` / ``10:`` as the kernel's 32-bit handle."""
    maj, _, mnr = text.partition(":")
    return (int(maj or "0", 16) << 16) | int(mnr or "0", 16)


def raw_qdisc_options(net, ns, dev, at_handle):
    """(kind, {TCA_OPTIONS attribute: u32}) of the qdisc ``at_handle`` of ``dev``, from
    an RTM_GETQDISC dump (for a kind tc cannot print)."""
    for q in _dump(net, ns, dev, RTM_GETQDISC, RTM_NEWQDISC):
        if q["handle"] == handle(at_handle):
            return q["kind"], {t: struct.unpack_from("=I", v)[0]
                               for t, v in q["options"].items() if len(v) >= 4}
    raise AssertionError(f"{ns or 'root'}/{dev}: no qdisc {at_handle} in the kernel's dump")


def htb_classes(net, ns, dev):
    """{classid text: {parent, rate_Bps, ceil_Bps, buffer_ticks, cbuffer_ticks, burst_B,
    cburst_B}} of ``dev``'s HTB classes, from an RTM_GETTCLASS dump."""
    out = {}
    for c in _dump(net, ns, dev, RTM_GETTCLASS, RTM_NEWTCLASS):
        if c["kind"] != "htb" or TCA_HTB_PARMS not in c["options"]:
            continue
        f = _HTB_OPT.unpack_from(c["options"][TCA_HTB_PARMS])
        rate, ceil, buffer, cbuffer = f[5], f[11], f[12], f[13]
        if TCA_HTB_RATE64 in c["options"]:
            rate = struct.unpack_from("=Q", c["options"][TCA_HTB_RATE64])[0]
        if TCA_HTB_CEIL64 in c["options"]:
            ceil = struct.unpack_from("=Q", c["options"][TCA_HTB_CEIL64])[0]
        h = c["handle"]
        out[f"{h >> 16:x}:{h & 0xFFFF:x}"] = {
            "parent": c["parent"], "rate_Bps": rate, "ceil_Bps": ceil,
            "buffer_ticks": buffer, "cbuffer_ticks": cbuffer,
            "burst_B": buffer * PSCHED_TICK_NS * 1e-9 * rate,
            "cburst_B": cbuffer * PSCHED_TICK_NS * 1e-9 * ceil}
    return out


def leaf(qdiscs, parent="1:1"):
    """The qdisc at ``parent`` in ``tc -j`` output; AssertionError if none."""
    found = [q for q in qdiscs if q.get("parent") == parent]
    assert len(found) == 1, f"no single leaf at {parent}: {qdiscs}"
    return found[0]


# ------------------------------------------------------------------ expectations
def codel_us(us):
    """A CoDel/FQ-CoDel time as the kernel dumps it: stored in units of 1024 ns
    (codel_time_t, CODEL_SHIFT 10, truncated), dumped back in µs (truncated)."""
    return ((int(us) * 1000) >> 10 << 10) // 1000


def netem_seconds(ms):
    """A netem delay or jitter as ``tc -j`` prints it, in seconds: the kernel dumps it in
    psched ticks (ns >> 6) and tc turns those into whole microseconds (truncated)."""
    ticks = int(round(ms * 1e6)) >> 6
    return int(ticks / tc_tick_in_usec()) / 1e6


def jiffies_us(us, hz):
    """PIE's tupdate as the kernel dumps it: usecs_to_jiffies (rounded up to a tick),
    then jiffies_to_usecs."""
    assert hz, "CONFIG_HZ of this kernel is unknown (no /boot/config-*): cannot tell " \
               "how sch_pie rounds tupdate"
    tick_us = 1e6 / hz
    return round(math.ceil(us / tick_us - 1e-9) * tick_us)


def red_wlog(qmin, burst, avpkt):
    """tc's tc_red_eval_ewma: the EWMA weight log RED gets from min, burst and avpkt."""
    a = burst + 1 - qmin / avpkt
    assert a >= 1.0, (qmin, burst, avpkt)
    w = 0.5
    for wlog in range(1, 32):
        if a <= (1 - (1 - w) ** burst) / w:
            return wlog
        w /= 2
    raise AssertionError("no RED Wlog")


def red_scell_log(wlog, avpkt, rate_bytes_s):
    """tc's tc_red_eval_idle_damping: Scell_log from Wlog, avpkt and the bandwidth."""
    # tc_calc_xmittime: whole microseconds (unsigned), then ticks (unsigned)
    xmit_ticks = int(int(1e6 * avpkt / rate_bytes_s) * tc_tick_in_usec())
    lw = -math.log(1.0 - 1.0 / (1 << wlog)) / xmit_ticks
    maxtime = 31 / lw
    for clog in range(32):
        if maxtime / (1 << clog) < 512:
            return clog
    raise AssertionError("no RED Scell_log")


def expected_burst_bytes(rate_mbit, env=None):
    """The HTB burst the project documents for a class of ``rate_mbit``: ``env``'s
    BUFFERBLOAT_HTB_BURST_MS ms of the rate if set, else under TCG 20 ms of it (both
    clamped to 1600 B..64 KiB); elsewhere none is given and tc's default applies (rate /
    psched HZ + tc's mtu 1600)."""
    env = os.environ if env is None else env
    burst_ms = env.get(BURST_ENV)
    if burst_ms is None and env.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg":
        burst_ms = BURST_MS_TCG
    rate_bytes = rate_mbit * 1e6 / 8
    if burst_ms is None:
        return int(rate_bytes) // psched()[3] + TC_HTB_MTU
    return int(min(BURST_MAX, max(BURST_MIN, rate_bytes * float(burst_ms) / 1e3)))


def check_htb_class(got, rate_mbit, where, env=None):
    """The class ``got`` (htb_classes' entry) holds ``rate_mbit`` as rate and ceil, and
    the documented burst and cburst: tc turns a burst into whole microseconds at the rate
    (tc_calc_xmittime truncates to an unsigned µs), then into psched ticks, so it comes
    back short by up to 1 µs plus one tick of the rate's bytes."""
    rate_bytes = round(rate_mbit * 1e6) // 8
    assert got["rate_Bps"] == rate_bytes, \
        f"{where}: HTB rate {got['rate_Bps']} B/s, configured {rate_mbit:g} Mbit/s = {rate_bytes}"
    assert got["ceil_Bps"] == rate_bytes, \
        f"{where}: HTB ceil {got['ceil_Bps']} B/s, configured {rate_bytes}"
    want = expected_burst_bytes(rate_mbit, env)
    tol = rate_bytes * (1e-6 + PSCHED_TICK_NS * 1e-9) + 0.01
    for key in ("burst_B", "cburst_B"):
        assert want - tol <= got[key] <= want + 0.01, \
            f"{where}: HTB {key[:-2]} {got[key]:.1f} B, expected {want} B (- {tol:.2f})"


def link_directions(net):
    """[(ns, dev, rate_mbit, what)] of every shaped link direction of ``net``, from its
    topology: each sender's egress and the switch port towards it at the access rate,
    the bottleneck egress at its rate, the receiver's egress at reverse_mbit (default the
    bottleneck rate)."""
    topo = net.topo
    out = []
    for spec in topo.link_specs:
        ia, ib = net.intfs[(spec.a, spec.b)]
        if spec.bottleneck:
            out.append((None, ia, spec.rate_mbit, "bottleneck forward"))
            rev = topo.params.get("reverse_mbit") or spec.rate_mbit
            out.append((spec.b, ib, rev, "bottleneck reverse"))
        else:
            out.append((spec.a, ia, spec.rate_mbit, f"{spec.a} egress"))
            out.append((None, ib, spec.rate_mbit, f"port towards {spec.a}"))
    return out


def check_every_htb_class(net, env=None):
    """Every link direction has htb 1: at its root and one class 1:1 at the configured
    rate, ceil and burst."""
    for ns, dev, rate, what in link_directions(net):
        classes = htb_classes(net, ns, dev)
        where = f"{what} ({ns or 'root'}/{dev})"
        assert set(classes) == {"1:1"}, f"{where}: HTB classes {sorted(classes)}"
        check_htb_class(classes["1:1"], rate, where, env)


def expected_host_sysctls(topo, host):
    """The sysctls the project documents for ``host`` of ``topo`` (topology.py's
    parameters): the receive buffer's default (and a maximum at least as large), no
    cached metrics, ECN asked for when the topology or the qdisc says so (else the
    namespace's default, 2), slow start after idle and the send buffer's maximum when
    given, and a sender's congestion control."""
    p = topo.params
    want = {"net.ipv4.tcp_no_metrics_save": "1"}
    ecn = p.get("ecn")
    if ecn is None:
        ecn = bool(topo.qdisc.params.get("ecn"))
    want["net.ipv4.tcp_ecn"] = "1" if ecn else "2"
    if p.get("slow_start_after_idle") is not None:
        want["net.ipv4.tcp_slow_start_after_idle"] = str(p["slow_start_after_idle"])
    if host in topo.ccas:
        want["net.ipv4.tcp_congestion_control"] = topo.ccas[host]
    return want


def check_host_sysctls(net):
    """Every host's sysctls, read back in its namespace, are as configured."""
    topo = net.topo
    p = topo.params
    keys = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_ecn",
            "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_slow_start_after_idle",
            "net.ipv4.tcp_congestion_control")
    got_all = {}
    for host in list(topo.senders) + [topo.receiver]:
        got = sysctls(net, host, keys)
        got_all[host] = got
        for key, value in expected_host_sysctls(topo, host).items():
            assert got.get(key) == value, f"{host}: {key} is {got.get(key)!r}, configured {value!r}"
        rmem = [int(v) for v in got["net.ipv4.tcp_rmem"].split()]
        assert rmem[1] == p["rcvbuf_bytes"] and rmem[2] >= p["rcvbuf_bytes"], \
            f"{host}: tcp_rmem {rmem}, configured default {p['rcvbuf_bytes']}"
        if p.get("sndbuf_bytes"):
            wmem = [int(v) for v in got["net.ipv4.tcp_wmem"].split()]
            assert wmem[2] == p["sndbuf_bytes"], \
                f"{host}: tcp_wmem {wmem}, configured maximum {p['sndbuf_bytes']}"
        if p.get("advmss_bytes"):
            routes = [r for r in net.run(host, ["ip", "-4", "route", "show"]).splitlines()
                      if r.strip()]
            assert routes, f"{host}: no IPv4 route"
            for r in routes:
                words = r.split()
                assert "advmss" in words and words[words.index("advmss") + 1] == \
                    str(p["advmss_bytes"]), f"{host}: route {r!r}, configured advmss " \
                                            f"{p['advmss_bytes']}"
    return got_all


# ------------------------------------------------------------------ TCP sockets
def tcp_socket_state(net, src, dst, payload=64 * 1024):
    """Open a TCP connection ``src`` -> ``dst`` across the emulated links (sockets made
    inside each host's namespace), send ``payload`` bytes, and read back the sender's
    socket: {"cca", "ecn", "timestamps", "snd_mss", "peer_ecn", "ss"} (``ss``: the
    sender namespace's ``ss -tin`` line of it, as one string)."""
    dst_ip = net.ip(dst)
    srv = in_netns(pid_of(net, dst), lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    cli = in_netns(pid_of(net, src), lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    conn = None
    try:
        srv.bind((dst_ip, 0))
        srv.listen(1)
        srv.settimeout(30)
        port = srv.getsockname()[1]
        cli.settimeout(30)
        cli.connect((dst_ip, port))
        conn, _ = srv.accept()
        conn.settimeout(30)
        cli.sendall(b"\0" * payload)
        got = 0
        while got < payload:
            chunk = conn.recv(65536)
            assert chunk, "the connection closed early"
            got += len(chunk)
        cca = cli.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0")[0].decode()
        info = cli.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 104)
        peer = conn.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 104)
        cport = cli.getsockname()[1]
        ss = net.run(src, ["ss", "-H", "-t", "-i", "-o", "-n", "state", "established",
                           "dst", f"{dst_ip}:{port}", "sport", f"= :{cport}"])
        return {"cca": cca, "ecn": bool(info[5] & TCPI_OPT_ECN),
                "timestamps": bool(info[5] & TCPI_OPT_TIMESTAMPS),
                "snd_mss": struct.unpack_from("=I", info, 16)[0],
                "peer_ecn": bool(peer[5] & TCPI_OPT_ECN), "ss": " ".join(ss.split())}
    finally:
        for s in (conn, cli, srv):
            if s is not None:
                s.close()


def check_socket(net, src, cca, ecn, advmss=None):
    """A connection from ``src`` to the receiver runs ``cca`` with ECN on iff ``ecn``
    (both ends, and as ``ss`` shows it); with ``advmss`` the sender's segments carry at
    most the receiver's advertised MSS (less the timestamp option when on)."""
    st = tcp_socket_state(net, src, net.topo.receiver)
    where = f"{src} -> {net.topo.receiver}"
    assert st["cca"] == cca, f"{where}: socket congestion control {st['cca']!r}, configured {cca!r}"
    assert st["ecn"] is ecn and st["peer_ecn"] is ecn, \
        f"{where}: ECN negotiated {st['ecn']}/{st['peer_ecn']} (sender/receiver), " \
        f"configured {ecn}"
    tokens = st["ss"].split()
    assert cca in tokens, f"{where}: ss shows no {cca!r}: {st['ss']!r}"
    assert ("ecn" in tokens) is ecn, f"{where}: ss's ecn flag is not {ecn}: {st['ss']!r}"
    if advmss:
        want = advmss - (TCP_TIMESTAMP_OPTION_BYTES if st["timestamps"] else 0)
        assert st["snd_mss"] == want, f"{where}: sender MSS {st['snd_mss']}, advmss " \
                                      f"{advmss} configured (expected {want})"
    return st
