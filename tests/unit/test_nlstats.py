"""The netlink parsers on captured kernel answers (tests/fixtures/netlink/, made by its
capture.py), checked against what ``tc -s -j qdisc show`` / ``tc -s class show`` /
``ss -tin`` printed at the same moment (the capture froze the bottleneck and retried
until the dumps before and after the tool's run decoded alike, so values are equal, not
close; the only tolerances are tc's and ss's own rounding where they print rounded).
"""
import glob
import json
import os
import re
import struct

import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.measure.sampler_rows import qdisc_row, tcp_row
from bufferbloat.net import qdiscs
from bufferbloat.netlink import nlstats
from tests.conftest import FIXTURES

TCP_COLUMNS = SERIES_COLUMNS["tcp"]

NL = os.path.join(FIXTURES, "netlink")
QDISC_CASES = sorted(os.path.basename(p)[:-len(".qdisc.bin")]
                     for p in glob.glob(os.path.join(NL, "*.qdisc.bin")))
TCP_CASES = sorted(os.path.basename(p)[:-len(".diag.bin")]
                   for p in glob.glob(os.path.join(NL, "*.diag.bin")))
NEEDED = {"host_htb_pfifo", "host_htb_bfifo", "host_tcp_bbr", "vm_pie", "vm_codel",
          "vm_fq_codel", "vm_red", "vm_cake"}


def _load(case, ext, mode="r"):
    with open(os.path.join(NL, f"{case}.{ext}"), mode) as f:
        return f.read()


def _meta(case):
    return json.loads(_load(case, "meta.json"))


def test_every_fixture_is_there():
    assert NEEDED <= set(QDISC_CASES), f"missing fixtures: {NEEDED - set(QDISC_CASES)}"
    assert {"host_htb_pfifo", "host_tcp_bbr"} <= set(TCP_CASES)


@pytest.mark.parametrize("case", QDISC_CASES)
def test_qdisc_dump_matches_tc(case):
    meta = _meta(case)
    got = qdiscs.parse_qdisc_dump(_load(case, "qdisc.bin", "rb"), meta["ifindex"])
    for q in got:
        qdiscs.finish_qdisc(q)
    after = qdiscs.parse_qdisc_dump(_load(case, "qdisc-after.bin", "rb"), meta["ifindex"])
    tc = json.loads(_load(case, "tc.json"))
    assert [q["kind"] for q in got] == [t["kind"] for t in tc] == [q["kind"] for q in after]
    for q, t, qa in zip(got, tc, after):
        assert nlstats.tc_handle(q["handle"]) == t["handle"]
        assert nlstats.tc_handle(q["parent"]) == ("root" if t.get("root") else t["parent"])
        for ours, theirs in (("bytes", "bytes"), ("packets", "packets"), ("drops", "drops"),
                             ("overlimits", "overlimits"), ("requeues", "requeues"),
                             ("backlog", "backlog"), ("qlen", "qlen")):
            assert q[ours] == t[theirs], (q["kind"], ours)
        _check_xstats(q, t, qa)
    leaf = next(q for q in got if q["parent"] == 0x00010001)
    assert leaf["qlen"] > 0 and leaf["backlog"] > 0  # captured with a standing queue
    row = qdisc_row(1.5, meta["dev"], leaf)
    assert row[:5] == (1.5, meta["dev"], nlstats.tc_handle(leaf["handle"]), "1:1",
                       leaf["kind"])


def _check_xstats(q, t, qa):
    kind = q["kind"]
    if kind == "pie":
        # tc prints prob = xstats.prob / UINT64_MAX (%lg: 6 significant digits). PIE's
        # timer moves prob even while nothing dequeues: tc's value lies between the dumps
        # taken just before and just after tc ran.
        lo, hi = sorted((q["prob"], qa["prob"]))
        assert lo * (1 - 1e-5) <= t["prob"] <= hi * (1 + 1e-5)
        assert 0 < q["prob"] < 1
        assert q["delay_us"] == t["delay"] and q["delay_us"] > 0
        assert q["maxq_pkts"] == t["maxq"]
        assert q["early_drops"] == t["dropped"] and q["marks"] == t["ecn_mark"]
        assert q["pie_overlimit"] == t["overlimit"] and q["packets_in"] == t["pkts_in"]
    elif kind == "codel":
        assert q["delay_us"] == t["ldelay"] and q["delay_us"] > 0
        assert q["maxpacket"] == t["maxpacket"] and q["count"] == t["count"]
        assert q["drop_overlimit"] == t["drop_overlimit"] and q["marks"] == t["ecn_mark"]
        assert q["early_drops"] == q["drops"] - t["drop_overlimit"]
    elif kind == "fq_codel":
        assert q["maxpacket"] == t["maxpacket"] and q["marks"] == t["ecn_mark"]
        assert q["drop_overlimit"] == t["drop_overlimit"]
        assert q["new_flow_count"] == t["new_flow_count"]
        assert q["new_flows_len"] == t["new_flows_len"]
        assert q["old_flows_len"] == t["old_flows_len"]
        assert q["memory_usage"] == t["memory_used"]
    elif kind == "red":
        assert q["early_drops"] == t["early"] and q["pdrop"] == t["pdrop"]
        assert q["marks"] == t["marked"] and q["other"] == t["other"]
        assert q["early_drops"] > 0
    elif kind == "cake":   # its tins: test_cake_tins_match_tc
        assert q["memory_used"] == t["memory_used"] and len(q["tins"]) == len(t["tins"])
        assert q["delay_us"] > 0 and "prob" not in q
    else:
        assert "delay_us" not in q and "prob" not in q


def _tc_time_us(text):
    """tc's sprint_time ("12.3ms", "850us", "1.2s") in us."""
    m = re.fullmatch(r"([0-9.]+)(s|ms|us)", text)
    return float(m[1]) * {"s": 1e6, "ms": 1e3, "us": 1}[m[2]]


def test_cake_tins_match_tc():
    """CAKE's nested per-tin xstats (TCA_CAKE_STATS_TIN_STATS) decoded as tc -s -j
    printed them at the same moment, and the qdisc's totals and rows made of them."""
    case = "vm_cake"
    meta = _meta(case)
    qs = qdiscs.parse_qdisc_dump(_load(case, "qdisc.bin", "rb"), meta["ifindex"])
    cake = next(q for q in qs if q["kind"] == "cake")
    tc = next(t for t in json.loads(_load(case, "tc.json")) if t["kind"] == "cake")
    assert (cake["memory_used"], cake["memory_limit"]) == (tc["memory_used"],
                                                           tc["memory_limit"])
    assert len(cake["tins"]) == len(tc["tins"]) == 3          # diffserv3
    for ours, theirs in zip(cake["tins"], tc["tins"]):
        for a, b in (("sent_bytes", "sent_bytes"), ("sent_packets", "sent_packets"),
                     ("dropped_packets", "drops"), ("ecn_marked_packets", "ecn_mark"),
                     ("backlog_bytes", "backlog_bytes"), ("peak_delay_us", "peak_delay_us"),
                     ("avg_delay_us", "avg_delay_us"), ("base_delay_us", "base_delay_us"),
                     ("target_us", "target_us"), ("interval_us", "interval_us")):
            assert ours[a] == theirs[b], (ours["tin"], a)
    busy = [t for t in tc["tins"] if t["sent_packets"]]
    assert cake["delay_us"] == max(t["avg_delay_us"] for t in busy) > 0
    assert cake["early_drops"] == sum(t["drops"] for t in tc["tins"]) > 0
    rows = qdiscs.finish_qdiscs(qs)
    tins = [r for r in rows if r["kind"] in qdiscs.ROW_KINDS]
    assert [nlstats.tc_handle(r["handle"]) for r in tins] == ["10:1", "10:2", "10:3"]
    assert all(r["parent"] == cake["handle"] for r in tins)
    assert rows.index(tins[0]) == rows.index(cake) + 1         # after their qdisc


def test_fq_codel_flow_classes_match_tc():
    case = "vm_fq_codel"
    meta = _meta(case)
    classes = qdiscs.parse_class_dump(_load(case, "class.bin", "rb"), meta["ifindex"])
    flows = [c for c in classes if c["kind"] == "fq_codel_flow"]
    text = _load(case, "tc-class.txt")
    tc_ldelay = [_tc_time_us(m) for m in re.findall(r"ldelay (\S+)", text)]
    assert flows and len(flows) == len(tc_ldelay)
    for c, us in zip(flows, tc_ldelay):
        # sprint_time prints 3 significant digits
        assert c["ldelay_us"] == pytest.approx(us, rel=0.006, abs=1)
    qs = qdiscs.parse_qdisc_dump(_load(case, "qdisc.bin", "rb"), meta["ifindex"])
    qdiscs.merge_classes(qs, classes)
    fq = next(q for q in qs if q["kind"] == "fq_codel")
    assert fq["active_flows"] == len(flows)
    assert fq["delay_us"] == max(c["ldelay_us"] for c in flows) > 0


def _ss_sockets(text):
    """{sport: {field: value}} from ``ss -tin`` text."""
    out = {}
    lines = text.splitlines()
    for head, info in zip(lines[1::2], lines[2::2]):
        sport = int(head.split()[3].rsplit(":", 1)[1])
        d = {"cca": info.split()[0]}
        for k, v in re.findall(r"\b([a-z_]+):([0-9./]+)", info):
            d[k] = v
        for k, v in re.findall(r"\b(pacing_rate|delivery_rate) ([0-9]+)bps", info):
            d[k] = int(v)
        d["app_limited"] = " app_limited" in info
        bbr = re.search(r"bbr:\(bw:([0-9]+)bps,mrtt:([0-9.]+)", info)
        if bbr:
            d["bbr_bw"], d["bbr_mrtt"] = int(bbr[1]), float(bbr[2])
        out[sport] = d
    return out


@pytest.mark.parametrize("case", TCP_CASES)
def test_diag_dump_matches_ss(case):
    socks = nlstats.parse_diag_dump(_load(case, "diag.bin", "rb"))
    ss = _ss_sockets(_load(case, "ss.txt"))
    assert sorted(s["sport"] for s in socks) == sorted(ss)
    for s in socks:
        i, t = s["info"], ss[s["sport"]]
        assert s["dport"] == 5201 and s["state"] == "ESTAB"
        assert s["cca"] == t["cca"]
        srtt, rttvar = t["rtt"].split("/")
        assert i["rtt"] == round(float(srtt) * 1000)
        assert i["rttvar"] == round(float(rttvar) * 1000)
        assert i["snd_cwnd"] == int(t["cwnd"]) and i["snd_mss"] == int(t["mss"])
        assert i["bytes_acked"] == int(t["bytes_acked"])
        assert i["unacked"] == int(t.get("unacked", 0))
        assert i["sacked"] == int(t.get("sacked", 0)) and i["lost"] == int(t.get("lost", 0))
        if "retrans" in t:
            cur, total = t["retrans"].split("/")
            assert (i["retrans"], i["total_retrans"]) == (int(cur), int(total))
        if "ssthresh" in t:
            assert i["snd_ssthresh"] == int(t["ssthresh"])
        else:
            assert i["snd_ssthresh"] >= 0xFFFF  # ss leaves an "infinite" ssthresh out
        assert i["pacing_rate"] * 8 == t["pacing_rate"]
        assert i["delivery_rate"] * 8 == t["delivery_rate"]
        row = dict(zip(("t", "flow", "host", "src", "sport", "dst", "dport", "cca", "state",
                        "cwnd_pkts", "ssthresh_pkts", "srtt_us", "rttvar_us", "mss_bytes",
                        "in_flight_pkts", "retrans_total", "bytes_acked", "delivery_rate_bps",
                        "pacing_rate_bps", "bbr_bw_bps", "bbr_min_rtt_us"),
                       tcp_row(0.25, "h1-1", "h1", s)))
        assert row["in_flight_pkts"] == i["unacked"] - i["sacked"] - i["lost"] + i["retrans"]
        # study E's fields: the kernel's min RTT, data segments and bytes sent
        assert i["min_rtt"] == round(float(t["minrtt"]) * 1000)
        assert i["data_segs_out"] == int(t["data_segs_out"])
        assert i["bytes_sent"] == int(t["bytes_sent"])
        full = dict(zip(TCP_COLUMNS, tcp_row(0.25, "h1-1", "h1", s)))
        assert (full["min_rtt_us"], full["data_segs_out"], full["bytes_sent"]) == \
            (i["min_rtt"], i["data_segs_out"], i["bytes_sent"])
        assert row["delivery_rate_bps"] == t["delivery_rate"]
        # the sender-side check's fields: ss prints busy (us / 1000, when non-zero),
        # rwnd_limited and sndbuf_limited (when non-zero) and the app_limited flag; ss
        # ran just after the dump (the capture script): busy grew by <= 0.11 s between
        assert 0 <= int(t.get("busy", 0)) - i["busy_time"] / 1000 <= 200
        for name in ("rwnd_limited", "sndbuf_limited"):
            assert i[name] // 1000 == int(float(t.get(name, 0))), name
        assert bool(full["app_limited"]) is t["app_limited"]
        # the highest byte sent (docs/reference/one-way-delay.md): ss prints both when non-zero
        assert i["bytes_retrans"] == int(t.get("bytes_retrans", 0))
        assert i["notsent_bytes"] == int(t.get("notsent", 0))
        assert (full["bytes_retrans"], full["notsent_bytes"]) == \
            (i["bytes_retrans"], i["notsent_bytes"])
        assert (full["busy_us"], full["rwnd_limited_us"], full["sndbuf_limited_us"]) == \
            (i["busy_time"], i["rwnd_limited"], i["sndbuf_limited"])
        if s["cca"] == "bbr":
            assert row["bbr_bw_bps"] == t["bbr_bw"]
            assert row["bbr_min_rtt_us"] == round(t["bbr_mrtt"] * 1000)
        else:
            assert row["bbr_bw_bps"] is None and s["bbr_min_rtt_us"] is None
    # the data connection (not iperf3's control connection) had a standing queue
    assert max(s["info"]["unacked"] for s in socks) > 10


def test_short_tcp_info_decodes_what_it_has():
    full = _load(TCP_CASES[0], "diag.bin", "rb")
    s = max(nlstats.parse_diag_dump(full), key=lambda s: s["info"]["bytes_acked"])
    # rebuild a 6.1-era (232 B) and a 3.x-era (104 B, up to total_retrans) tcp_info
    blob = _tcp_info_blob(full, s["sport"])
    short = nlstats.decode_tcp_info(blob[:104])
    assert short["snd_cwnd"] == s["info"]["snd_cwnd"] and short["rtt"] == s["info"]["rtt"]
    assert short["total_retrans"] == s["info"]["total_retrans"]
    assert short["bytes_acked"] is None and short["delivery_rate"] is None
    assert nlstats.decode_tcp_info(blob[:232]) == s["info"]


def _tcp_info_blob(data, sport):
    for _t, off, end in nlstats.iter_messages(data):
        if struct.unpack_from("!H", data, off + 4)[0] != sport:
            continue
        for atype, a, b in nlstats.iter_attrs(data, off + 72, end):
            if atype == nlstats.INET_DIAG_INFO:
                return data[a:b]
    raise AssertionError("socket not in dump")


def test_port_bytecode_layout():
    # one port: a single test, accept by falling off the end, reject 4 past it
    assert nlstats.port_bytecode([5201]) == struct.pack("=BBHBBH", 12, 8, 12, 0, 0, 5201)
    bc = nlstats.port_bytecode([5201, 5202], [40000])
    assert len(bc) == 3 * 8 + 2 * 4
    ops = [struct.unpack_from("=BBH", bc, o) for o in range(0, len(bc), 4)]
    # D_EQ 5201 | JMP | D_EQ 5202 | JMP | S_EQ 40000: every "no" skips its JMP,
    # every JMP's "no" lands exactly on the end
    assert ops[0] == (12, 8, 12) and ops[2] == (1, 4, len(bc) - 8)
    assert ops[3] == (12, 8, 12) and ops[5] == (1, 4, len(bc) - 20)
    assert ops[6] == (11, 8, 12) and ops[7][2] == 40000
    assert nlstats.port_bytecode() == b""


def test_netlink_error_is_raised():
    err = struct.pack("=IHHIIi", 36, nlstats.NLMSG_ERROR, 0, 1, 0, -22) + bytes(16)
    with pytest.raises(nlstats.NetlinkError):
        list(nlstats.iter_messages(err))


class _FakeReader:
    """Stands in for a TcpReader: returns the next prepared list of sockets."""

    def __init__(self, script):
        self.script = list(script)
        self.dumps = self.lookups = 0

    def read(self, _now):
        return self.script.pop(0)


def _sock(sport, acked, cookie):
    info = dict.fromkeys(nlstats._TI_MAIN_NAMES, 0)
    info.update(bytes_acked=acked, snd_cwnd=10, snd_ssthresh=nlstats.TCP_INFINITE_SSTHRESH,
                pacing_rate=(1 << 64) - 1)
    return {"sport": sport, "dport": 5201, "src": "10.0.0.1", "dst": "10.0.0.2",
            "cookie": cookie, "state": "ESTAB", "cca": "cubic", "info": info,
            "bbr_bw_Bps": None, "bbr_min_rtt_us": None}


def test_control_connection_rule():
    from bufferbloat.measure.sampler_flows import FlowGroup
    g = FlowGroup.__new__(FlowGroup)
    g.host, g.labels, g.min_bytes, g.hold_s = "h1", {"40001": "h1-1"}, 65536, 2.0
    g.by_dport, g.by_sport, g.sports = {}, {}, set()
    g.data, g.ignored, g.pending, g.all_data = set(), set(), {}, set()
    # control (40000) stays at 300 B; data (40003, unlabelled: one stream, by its
    # dport) passes 64 KiB at its third sample; the labelled stream (40001, a --cport
    # stream) is starved: 1 kB, a data flow all the same
    script = [[_sock(40000, 300, 1), _sock(40003, acked, 2), _sock(40001, 1000, 3)]
              for acked in (0, 20000, 70000, 90000)]
    script += [[_sock(40000, 300, 1), _sock(40003, 100000, 2), _sock(40001, 1000, 3)]
               for _ in range(30)]
    g.reader = _FakeReader(script)
    out = []
    for k in range(34):
        g.sample(k * 0.1, k * 0.1, out)
        if k == 1:   # the labelled stream written at once; the two others held
            assert [r[1] for r in out] == ["h1-1"] * 2 and g.horizon() == 0.0
    assert g.data == {2, 3} and g.ignored == {1} and g.pending == {}
    assert g.horizon() == float("inf")
    # every sample of each data flow
    assert sorted(r[1] for r in out) == ["h1-1"] * 34 + ["h1:40003"] * 34
    for label in ("h1-1", "h1:40003"):       # each flow's rows in time order
        times = [r[0] for r in out if r[1] == label]
        assert times == sorted(times)
    first = out[0]
    assert first[10] is None and first[18] is None  # infinite ssthresh, unlimited pacing


def test_a_servers_labelled_listening_port_keeps_the_control_rule():
    """A download is sampled at its server by the listening port (``sports``), which its
    control connection has as its source port too: a label there names the flow but does
    not make every socket on it data; the 64 KiB rule still tells them apart."""
    from bufferbloat.measure.sampler_flows import FlowGroup
    g = FlowGroup.__new__(FlowGroup)
    g.host, g.labels, g.min_bytes, g.hold_s = "h2", {"5221": "down"}, 65536, 2.0
    g.by_dport, g.by_sport, g.sports = {}, {5221: "down"}, {5221}
    g.data, g.ignored, g.pending, g.all_data = set(), set(), {}, set()
    g.reader = _FakeReader([[_sock(5221, 300, 1), _sock(5221, acked, 2)]
                            for acked in (0, 70000)] +
                           [[_sock(5221, 300, 1), _sock(5221, 90000, 2)]] * 30)
    out = []
    for k in range(32):
        g.sample(k * 0.1, k * 0.1, out)
    assert g.data == {2} and g.ignored == {1} and len(out) == 32
    assert not g.stream_port(5221) and g.stream_port(20000) is False


def test_flow_labels_are_given_before_sampling():
    """A socket's rows get its source port's label, else the label of the spec whose port
    it matched, else host:sport: tcp.csv is written labelled, never relabelled."""
    from bufferbloat.measure.sampler_flows import FlowGroup
    specs = [{"host": "h1", "pid": None, "dports": [5201], "sports": [], "label": "up",
              "labels": {"40002": "up-2"}},
             {"host": "h1", "pid": None, "dports": [], "sports": [5301], "label": "down",
              "labels": {}},
             {"host": "h1", "pid": None, "dports": [5401], "sports": [], "labels": {}}]
    g = FlowGroup(specs, "python", 0, 2.0, 0.1)
    assert g.label(40001, 5201) == "up"          # the spec's label, by its dport
    assert g.label(40002, 5201) == "up-2"        # a stream's own label, by its sport
    assert g.label(5301, 40003) == "down"        # the spec's label, by its sport
    assert g.label(40004, 5401) == "h1:40004"    # nobody labelled it


def test_ipv4_mapped_addresses_read_as_ipv4():
    """A dual-stack server socket (iperf3 -s) is AF_INET6 with an IPv4-mapped peer: its
    addresses are the IPv4 ones (tcp.csv's src/dst of a download, sampled at its server)."""
    import socket
    mapped = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 2])
    assert nlstats._addr(socket.AF_INET6, mapped) == "10.0.0.2"
    assert nlstats._addr(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, "fd00::2")) \
        == "fd00::2"
    assert nlstats._addr(socket.AF_INET, bytes([10, 0, 0, 1]) + bytes(12)) == "10.0.0.1"


def test_ports_without_control_connections_are_written_from_the_first_sample():
    """NetPerfMeter's data port carries data connections only: a flow that has sent
    nothing yet (it starts later, or sends little) is sampled from its first moment."""
    from bufferbloat.measure.sampler_flows import FlowGroup
    g = FlowGroup.__new__(FlowGroup)
    g.host, g.labels, g.min_bytes, g.hold_s = "h1", {}, 65536, 2.0
    g.data, g.ignored, g.pending = set(), set(), {}
    g.by_dport, g.by_sport, g.sports = {}, {}, set()
    g.all_data = {("d", 5201)}
    g.reader = _FakeReader([[_sock(40002, 0, 3)], [_sock(40002, 300, 3)]])
    out = []
    g.sample(0.0, 0.0, out)
    g.sample(0.1, 0.1, out)
    assert [r[0] for r in out] == [0.0, 0.1] and g.data == {3} and g.pending == {}
