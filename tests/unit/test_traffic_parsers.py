"""Parsers of the traffic tools, on real outputs captured through an emulated dumbbell
(tests/fixtures/tools/, see its README): iperf3 3.12 -J (one reno flow, -P 3 cubic, -R,
connection refused), iputils ping -D -O with a 1 s outage, curl -w; and the UDP stream
statistics on synthetic packets whose answers are known in closed form."""
import io
import json
import os

import pytest
from conftest import FIXTURES

from bufferbloat.core.errors import ParameterError
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.core.stats import percentile
from bufferbloat.traffic.base import Schedule
from bufferbloat.traffic.iperf import Iperf3Flow, sampled_flow
from bufferbloat.traffic.iperf.output import iperf3_rows, iperf3_stream_labels
from bufferbloat.traffic.ping import PingProbe, parse_ping, parse_ping_probes
from bufferbloat.traffic.udpstream import (
    parse_failed,
    parse_recv_csv,
    parse_sent,
    parse_start,
    stream_stats,
)
from bufferbloat.traffic.udptool import check_stream_params, read_start_at
from bufferbloat.traffic.web import WebFetcher, parse_curl_w

TOOLS = os.path.join(FIXTURES, "tools")
IPERF_COLUMNS = ["flow", "t_start", "t_end", "bytes", "bits_per_second", "retransmits",
                 "snd_cwnd_bytes", "rtt_us"]


def load(name):
    with open(os.path.join(TOOLS, name)) as f:
        return f.read()


def doc(name):
    return json.loads(load(name))


# ---------------------------------------------------------------- iperf3
def test_iperf3_single_flow_rows_sum_to_total_and_cca():
    d = doc("iperf3_single_reno.json")
    labels = iperf3_stream_labels(d, "f")
    assert labels == {52018: "f"}
    rows = iperf3_rows(d, "f", labels, offset_s=10.0)
    assert [list(r) for r in rows] == [IPERF_COLUMNS] * 3
    assert [r["flow"] for r in rows] == ["f"] * 3
    assert sum(r["bytes"] for r in rows) == d["end"]["sum_sent"]["bytes"] == 4328072
    assert rows[0]["bytes"] == 1982312 and rows[0]["retransmits"] == 8
    assert rows[0]["snd_cwnd_bytes"] == 157832 and rows[0]["rtt_us"] == 96374
    assert rows[0]["t_start"] == 10.0 and rows[0]["t_end"] == pytest.approx(11.00028)
    assert rows[-1]["t_end"] == pytest.approx(13.000336)
    assert d["end"]["sender_tcp_congestion"] == "reno"


def test_iperf3_parallel_streams_labelled_and_summed():
    d = doc("iperf3_p3_cubic.json")
    labels = iperf3_stream_labels(d, "bulk")
    assert labels == {48210: "bulk-1", 48212: "bulk-2", 48220: "bulk-3"}
    rows = iperf3_rows(d, "bulk", labels, offset_s=0.0)
    per = {}
    for r in rows:
        per.setdefault(r["flow"], []).append(r)
    assert sorted(per) == ["bulk", "bulk-1", "bulk-2", "bulk-3"]
    assert all(len(v) == 3 for v in per.values())
    total = d["end"]["sum_sent"]["bytes"]
    assert sum(r["bytes"] for r in per["bulk"]) == total == 3926976
    assert sum(r["bytes"] for k in ("bulk-1", "bulk-2", "bulk-3") for r in per[k]) == total
    assert per["bulk-1"][0]["bytes"] == 589336 and per["bulk-1"][0]["rtt_us"] == 102798
    assert per["bulk"][0]["snd_cwnd_bytes"] == "" and per["bulk"][0]["rtt_us"] == ""
    for i, r in enumerate(per["bulk"]):  # the sum row is the sum of the streams' rows
        assert r["bytes"] == sum(per[f"bulk-{k}"][i]["bytes"] for k in (1, 2, 3))
    assert d["end"]["sender_tcp_congestion"] == "cubic"


def test_iperf3_reverse_rows_come_from_the_sending_server():
    client, server = doc("iperf3_reverse.json"), doc("iperf3_reverse_server.json")
    assert client["start"]["test_start"]["reverse"] == 1
    # the client received: its intervals are receiver-side, without cwnd/RTT
    assert all(not iv["sum"]["sender"] for iv in client["intervals"])
    assert server["end"]["sum_sent"]["bytes"] == client["end"]["sum_sent"]["bytes"] == 4186168
    assert server["end"]["sum_received"]["bytes"] == 0
    labels = iperf3_stream_labels(client, "dl")
    assert labels == {39272: "dl"}
    rows = iperf3_rows(server, "dl", labels, 5.0, port_key="remote_port")
    assert [r["flow"] for r in rows] == ["dl"] * 3
    assert sum(r["bytes"] for r in rows) == 4186168
    assert rows[0]["rtt_us"] == 62151 and rows[0]["snd_cwnd_bytes"] == 99912


class _FakeNet:
    def ip(self, host):
        return {"h1": "10.0.0.1", "h2": "10.0.0.2"}[host]


def _parsed_flow(name, client_file, server_file, direction, launched_real, rmm, t0):
    f = Iperf3Flow(_FakeNet(), "h1", "h2", 3, port=5203, name=name, direction=direction,
                   t0=t0, realtime_minus_monotonic=rmm)
    f.client_raw, f.server_raw = load(client_file), load(server_file)
    f.result, f.server_result = json.loads(f.client_raw), json.loads(f.server_raw)
    f.launched_real = launched_real
    return f


def test_iperf3_flow_object_time_and_labels():
    # launched 0.7963 s into second 1795289674 (the capture's time.time()), the JSON
    # stamp says 1795289674: time zero is the launch moment
    rmm = 1795289000.0
    f = _parsed_flow("dl", "iperf3_reverse.json", "iperf3_reverse_server.json", "down",
                     1795289674.796352, rmm, t0=670.0)
    assert f.time_zero_mono() == pytest.approx(674.796352)
    rows = f.rows()
    assert rows[0]["t_start"] == pytest.approx(4.796352, abs=1e-6)
    assert sum(r["bytes"] for r in rows) == 4186168  # bytes sent by h2
    assert f.flow_labels() == {("h1", 39272): "dl"}
    s = f.summary()
    assert s["sender"] == "h2" and s["sender_cca"] == "cubic" and s["error"] is None
    assert s["bytes_received"] == 3620000
    assert set(f.raw_outputs()) == {"dl.client.json", "dl.server.json"}
    assert "-R" in f.client_args() and f.client_args()[:3] == ["iperf3", "-c", "10.0.0.2"]
    # a launch earlier than the stamp's second: the stamp wins
    f.launched_real = 1795289673.9
    assert f.time_zero_mono() == pytest.approx(1795289674 - rmm)


def test_iperf3_connection_refused_is_an_error_without_rows():
    d = doc("iperf3_refused.json")
    assert d["error"] == "unable to connect to server: Connection refused"
    assert iperf3_stream_labels(d, "x") == {}
    assert iperf3_rows(d, "x", {}, 0.0) == []
    f = _parsed_flow("x", "iperf3_refused.json", "iperf3_refused.json", "up", 1.0, 0.0, 0.0)
    f.error = f.result["error"]
    assert f.rows() == [] and f.summary()["error"].endswith("Connection refused")
    assert f.summary()["goodput_mbit"] is None


def test_iperf3_udp_flow_rows_and_loss():
    f = _parsed_flow("u", "iperf3_udp.json", "iperf3_udp.json", "up", 1.0, 0.0, 0.0)
    f.udp = True
    rows = f.rows()
    assert [r["bytes"] for r in rows] == [250504, 250504]
    assert sum(r["bytes"] for r in rows) == f.result["end"]["sum_sent"]["bytes"]
    assert rows[0]["retransmits"] == rows[0]["rtt_us"] == rows[0]["snd_cwnd_bytes"] == ""
    s = f.summary()
    assert s["udp_lost_pct"] == 0 and s["goodput_mbit"] == pytest.approx(2.0036, abs=1e-4)
    assert s["udp_jitter_ms"] == pytest.approx(0.0098, abs=1e-4)
    assert f.flow_labels() == {("h1", 35377): "u"}


def test_iperf3_upload_streams_are_labelled_before_they_run():
    """With --cport, stream i binds cport + i - 1: the sampler is told each stream's
    label by its source port before the flow starts (tcp.csv is written labelled)."""
    f = Iperf3Flow(_FakeNet(), "h1", "h2", 3, port=5201, parallel=3, name="p", cport=20000)
    args = f.client_args()
    assert args[args.index("--cport") + 1] == 20000
    assert f.stream_labels() == {20000: "p-1", 20001: "p-2", 20002: "p-3"}
    assert sampled_flow(f) == {"host": "h1", "dports": [5201], "label": "p",
                               "labels": {20000: "p-1", 20001: "p-2", 20002: "p-3"}}
    one = Iperf3Flow(_FakeNet(), "h1", "h2", 3, port=5202, name="one")
    assert "--cport" not in one.client_args() and one.stream_labels() == {}
    assert sampled_flow(one) == {"host": "h1", "dports": [5202], "label": "one"}
    down = Iperf3Flow(_FakeNet(), "h2", "h1", 3, port=5203, name="dl", direction="down")
    assert sampled_flow(down) == {"host": "h1", "sports": [5203], "label": "dl"}
    with pytest.raises(ParameterError):
        Iperf3Flow(_FakeNet(), "h1", "h2", 3, parallel=4, cport=65533)


@pytest.mark.parametrize("kwargs", [dict(duration_s=0), dict(port=0), dict(port=70000),
                                    dict(parallel=0), dict(direction="sideways"),
                                    dict(duration_s=float("nan"))])
def test_iperf3_flow_rejects_bad_values(kwargs):
    args = dict(duration_s=3, port=5201)
    args.update(kwargs)
    with pytest.raises(ParameterError):
        Iperf3Flow(_FakeNet(), "h1", "h2", **args)


# ---------------------------------------------------------------- ping
def test_ping_with_outage_every_probe_and_losses():
    text = load("ping_D_O_loss.txt")
    res = parse_ping(text)  # the original parser keeps working
    assert res.sent == 30 and len(res.probes) == 20
    assert res.loss_pct == pytest.approx(100 * 10 / 30)
    assert res.probes[0] == (1795289678.217362, 1, 0.574)
    probes = parse_ping_probes(text, 0.1)
    assert [p[0] for p in probes] == list(range(1, 31))
    lost = [p[0] for p in probes if p[2] is None]
    assert lost == list(range(11, 21))
    by_seq = {p[0]: p for p in probes}
    # answered: send time = reply stamp - RTT
    assert by_seq[1][1] == pytest.approx(1795289678.217362 - 0.000574)
    # lost: "no answer yet" stamp (printed as the next probe leaves) - interval
    assert by_seq[11][1] == pytest.approx(1795289679.366650 - 0.1)
    times = [p[1] for p in probes]
    assert all(0.09 < b - a < 0.12 for a, b in zip(times, times[1:]))


def test_ping_stopped_without_summary():
    text = load("ping_D_O_stopped.txt")
    assert "packets transmitted" not in text
    probes = parse_ping_probes(text, 0.1)
    assert [p[0] for p in probes] == list(range(1, 12))
    assert all(p[2] is not None for p in probes)
    assert parse_ping(text).sent == 11


def test_ping_late_reply_and_tail_losses():
    text = ("[100.000000] 64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=1.00 ms\n"
            "[100.200000] no answer yet for icmp_seq=2\n"
            "[100.250000] 64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=150 ms\n"
            "[100.250100] 64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=150.1 ms (DUP!)\n"
            "[100.300000] no answer yet for icmp_seq=3\n"
            "\n--- 10.0.0.2 ping statistics ---\n"
            "5 packets transmitted, 2 received, 60% packet loss, time 400ms\n")
    probes = parse_ping_probes(text, 0.1)
    assert [(s, r) for s, _, r in probes] == [(1, 1.0), (2, 150.0), (3, None), (4, None),
                                              (5, None)]
    assert probes[1][1] == pytest.approx(100.1)
    assert probes[2][1] == pytest.approx(100.2)
    assert probes[4][1] == pytest.approx(100.4)


def test_ping_probe_rows_in_run_time():
    p = PingProbe(_FakeNet(), "h1", "h2", 0.1, name="p", t0=100.0,
                  realtime_minus_monotonic=1795289000.0)
    p.raw = load("ping_D_O_loss.txt")
    rows = p.rows()
    assert len(rows) == 30 and list(rows[0]) == ["probe", "t", "seq", "rtt_ms"]
    assert rows[0] == {"probe": "p", "t": pytest.approx(578.217362 - 0.000574, abs=1e-6),
                       "seq": 1, "rtt_ms": 0.574}
    assert rows[10]["rtt_ms"] == "" and rows[10]["seq"] == 11
    s = p.summary()
    assert s["sent"] == 30 and s["received"] == 20
    assert s["loss_pct"] == pytest.approx(33.333, abs=0.01)
    assert s["rtt_max_ms"] == 0.574 and s["rtt_min_ms"] == 0.059


# ---------------------------------------------------------------- curl
def test_curl_w_lines():
    blocks = [b for b in load("curl_w.txt").split("# ") if b]
    parsed = [parse_curl_w(b.split("\n", 1)[1]) for b in blocks]
    assert parsed[0] == {"connect_s": 0.000450, "ttfb_s": 0.003968, "total_s": 0.074405,
                         "http_code": 200, "size_bytes": 100000}
    assert parsed[1]["http_code"] == 200 and parsed[1]["size_bytes"] == 100000
    assert parsed[1]["connect_s"] <= parsed[1]["ttfb_s"] <= parsed[1]["total_s"]
    # connection refused (curl exit 7): code 000, nothing downloaded
    assert blocks[2].startswith("exit=7")
    assert parsed[2] == {"connect_s": 0.0, "ttfb_s": 0.0, "total_s": 0.002423,
                         "http_code": 0, "size_bytes": 0}
    assert parse_curl_w("") is None and parse_curl_w("garbage") is None


def test_web_fetcher_records_and_validates():
    w = WebFetcher(_FakeNet(), "h1", "h2", 8080, every_s=1.0, t0=0.0, expected_size=100000,
                   name="w")
    assert w.url == "http://10.0.0.2:8080/"
    assert "-w" in w.argv() and w.argv()[0] == "curl"
    w._record(0, 1.0, 1.1, 0, "0.000450 0.003968 0.074405 200 100000\n", "")
    w._record(1, 2.0, 2.5, -15, "", "", incomplete=True)
    w._record(2, 3.0, 3.1, 0, "0.001 0.002 0.003 200 99\n", "")
    rows = w.rows()
    assert [list(r) for r in rows] == [list(SERIES_COLUMNS["web"])] * 3
    assert rows[0]["ok"] is True and rows[0]["t"] == 1.0 and rows[0]["total_s"] == 0.074405
    assert rows[1]["ok"] is False and rows[1]["http_code"] == "" and rows[1]["total_s"] == 0.5
    assert rows[2]["ok"] is False  # short page
    s = w.summary()
    # the fetch still running at stop() was cut by the run's end: not a failure
    assert rows[1]["cut"] == 1 and rows[2]["cut"] == 0
    assert (s["fetches"], s["ok"], s["failed"], s["incomplete"], s["cut"]) == (3, 1, 1, 1, 1)
    for bad in (dict(every_s=0), dict(port=0)):
        with pytest.raises(ParameterError):
            WebFetcher(_FakeNet(), "h1", "h2", **{"port": 8080, **bad})


# ---------------------------------------------------------------- UDP stream statistics
def test_udp_stats_closed_form():
    # 1000-byte packets every 10 ms (800 kbit/s), constant 5 ms latency, seq 3 lost
    pk = [(s, s * 0.01, s * 0.01 + 0.005, 1000) for s in range(10) if s != 3]
    st = stream_stats(pk, sent=10)
    assert st["sent"] == 10 and st["received"] == 9 and st["loss_pct"] == 10.0
    assert st["latency_mean_ms"] == pytest.approx(5.0)
    assert st["latency_p99_ms"] == pytest.approx(5.0)
    assert st["jitter_ms"] == pytest.approx(0.0, abs=1e-9)
    assert st["throughput_kbit"] == pytest.approx(8 * 1000 * 8 / 0.09 / 1000)
    # alternating latency 0 / 10 ms: |D| = 10 ms each step; J after n steps = 10(1-(15/16)^n)
    pk = [(s, s * 0.01, s * 0.01 + (0.01 if s % 2 else 0.0), 100) for s in range(5)]
    assert stream_stats(pk, 5)["jitter_ms"] == pytest.approx(10 * (1 - (15 / 16) ** 4))
    assert stream_stats([], 4)["loss_pct"] == 100.0


def test_udp_sender_reads_its_start_time_from_stdin():
    assert read_start_at(io.StringIO("START_AT 12.5\n")) == 12.5
    assert read_start_at(io.StringIO("")) is None        # the run ended first: no send
    for bad in ("GO\n", "START_AT soon\n", "START_AT -1\n", "START_AT nan\n"):
        with pytest.raises(ParameterError):
            read_start_at(io.StringIO(bad))


def test_udp_receiver_csv_and_sender_report():
    text = "seq,t_sent,t_recv,size\n0,1.000000000,1.000200000,1200\n1,1.010,1.0103,1200\n"
    assert parse_recv_csv(text) == [(0, 1.0, 1.0002, 1200), (1, 1.01, 1.0103, 1200)]
    report = "START 1.0\nEND 2.0\nFAILED 3\nSENT 42\n"
    assert parse_sent(report) == 42 and parse_failed(report) == 3 and parse_sent("") is None
    assert parse_start(report) == 1.0 and parse_start("SENT 0\n") is None
    for bad in ((0, 1200, 1), (100, 8, 1), (100, 1200, 0), (100, 70000, 1)):
        with pytest.raises(ParameterError):
            check_stream_params(*bad)
    with pytest.raises(ParameterError):
        check_stream_params(100, 1200, 1, port=0)


def test_percentile_and_schedule_order():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 50) is None
    log = []

    class Obj:
        def __init__(self, n):
            self.n = n

        def start(self):
            log.append(("start", self.n))

        def stop(self):
            log.append(("stop", self.n))

    import time
    sched = Schedule(t0=time.monotonic())
    sched.add(Obj(2), at_s=0.1, stop_at_s=0.15)
    sched.add(Obj(1), at_s=0.0)
    sched.add(Obj(3), at_s=60)   # never reached
    sched.start()
    time.sleep(0.3)
    sched.stop()
    assert log == [("start", 1), ("start", 2), ("stop", 2), ("stop", 1)]


def test_webserver_page_is_exactly_the_size():
    from bufferbloat.webserver.__main__ import main, make_page
    for n in (1, 2, 54, 55, 56, 1000, 100_000, 1_000_003):
        assert len(make_page(n)) == n
    assert make_page(1000).startswith(b"<!DOCTYPE html>")
    for bad in (["--size", "0"], ["--port", "70000"], ["--size", "x"]):
        with pytest.raises(SystemExit) as exc:
            main(bad)
        assert exc.value.code == 2


def test_port_pools_are_disjoint_and_bounded():
    """Servers, UDP receivers and the client source ports an upload binds come from
    pools of their own; client ports lie below the kernel's ephemeral range (32768), so
    that no connection the kernel numbers can hold one; a pool that runs out says so."""
    from bufferbloat.core.errors import UsageError
    from bufferbloat.traffic.base import PORT_POOL_LAST, PartContext
    ctx = PartContext(None, 10.0, 0.0, 0.0)
    assert [ctx.ports("tcp"), ctx.ports("tcp", 8), ctx.ports("tcp")] == [5201, 5202, 5210]
    assert ctx.ports("tcp_client", 4) == 20000 and ctx.ports("tcp_client") == 20004
    assert ctx.ports("udp") == 5600
    assert PORT_POOL_LAST["tcp"] < 20000 and PORT_POOL_LAST["tcp_client"] < 32768
    with pytest.raises(UsageError, match="tcp_client ports"):
        ctx.ports("tcp_client", 32768 - 20005 + 1)
