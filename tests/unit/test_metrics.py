"""Metrics on synthetic series with answers computed by hand."""
import csv
import json
import math

import numpy as np
import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.results import metrics as m
from bufferbloat.results import metrics_flows, metrics_latency, metrics_queue
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter
from bufferbloat.results.rows import counter_delta

# ----------------------------------------------------------------------------- helpers

def test_rfc3550_jitter():
    sent = np.arange(100) * 0.25  # exact binary fractions: exactly 0
    assert metrics_latency.rfc3550_jitter(sent, sent + 0.5) == 0.0
    sent = np.arange(100) * 0.02
    assert metrics_latency.rfc3550_jitter(sent, sent + 0.035) == pytest.approx(0.0, abs=1e-12)
    # latency alternating 10 ms / 20 ms: |D| = 10 ms every packet after the first, so
    # J_k = J_{k-1} + (10 - J_{k-1}) / 16, i.e. J_k = 10 (1 - (15/16)^k) ms
    lat = np.where(np.arange(11) % 2 == 0, 0.010, 0.020)
    sent = np.arange(11) * 0.1
    j = 0.0
    for _ in range(10):
        j += (10.0 - j) / 16
    assert j == pytest.approx(10 * (1 - (15 / 16) ** 10))
    assert metrics_latency.rfc3550_jitter(sent, sent + lat) * 1e3 == pytest.approx(j)
    # arrival order, not send order: the same packets shuffled give the same jitter
    perm = np.random.default_rng(1).permutation(11)
    assert metrics_latency.rfc3550_jitter(sent[perm], (sent + lat)[perm]) * 1e3 == pytest.approx(j)
    assert metrics_latency.rfc3550_jitter([0.0], [1.0]) == 0.0
    with pytest.raises(ValueError):
        metrics_latency.rfc3550_jitter([], [])


def test_counter_delta_and_warmup_baseline():
    t = [0, 1, 2, 3, 4]
    v = [0, 10, 20, 30, 40]
    assert counter_delta(t, v) == (4.0, 40.0)
    assert counter_delta(t, v, cutoff_s=2.5) == (2.0, 20.0)  # from the sample at t=2
    assert counter_delta(t, [0, 10, 2, 5, 6]) == (4.0, 10 + 2 + 3 + 1)  # reset at t=2
    assert counter_delta([0], [5]) == (0.0, 0.0)


# ----------------------------------------------------------------------------- run dirs

RATE_MBIT = 1.5


def _write_run(path, warm_srtt_ms=10.0, srtt_ms=100.0, traffic=None, traffic_results=None):
    """A 10 s synthetic run: two TCP flows (one at 1 Mbit/s, one at 0.5), a FIFO leaf
    with a constant backlog, pings, web fetches and a UDP stream."""
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": RATE_MBIT}, traffic=traffic or [],
                    traffic_results=traffic_results or [])
    t = np.arange(0, 10.01, 0.1)
    tcp_rows = []
    for flow, mbit in (("h1-1", 1.0), ("h2-1", 0.5)):
        for ti in t:
            tcp_rows.append({"t": ti, "flow": flow, "host": flow[:2], "cca": "cubic",
                             "cwnd_pkts": 10 if ti < 5 else 20,
                             "srtt_us": (warm_srtt_ms if ti < 5 else srtt_ms) * 1e3,
                             "retrans_total": 0 if ti < 5 else 3,
                             "bytes_acked": round(ti * mbit * 1e6 / 8)})
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], tcp_rows)
    # htb root and the fifo leaf; backlog 15000 B (80 ms at 1.5 Mbit/s), sent 0.75 Mbit/s,
    # 2 drops per second during the first 5 s only
    qrows = []
    for ti in t:
        qrows.append({"t": ti, "dev": "s0-eth2", "handle": "1:", "parent": "root",
                      "kind": "htb", "qlen_pkts": 0, "backlog_bytes": 0,
                      "sent_bytes": round(ti * 1.5e6 / 8), "drops": 0})
        qrows.append({"t": ti, "dev": "s0-eth2", "handle": "10:", "parent": "1:1",
                      "kind": "pfifo", "qlen_pkts": 10, "backlog_bytes": 15000,
                      "sent_bytes": round(ti * 0.75e6 / 8), "sent_pkts": round(ti * 60),
                      "drops": round(min(ti, 5) * 2), "marks": None})
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], qrows)
    rtts = list(range(1, 101))  # 1..100 ms, then 4 lost
    w.add_rows("ping", SERIES_COLUMNS["ping"],
               [("h1", 0.1 * i, i + 1, r) for i, r in enumerate(rtts)]
               + [("h1", 10.0 + 0.1 * i, 101 + i, None) for i in range(4)])
    w.add_rows("web", SERIES_COLUMNS["web"],
               [{"fetch": f"f{i}", "t": float(i), "total_s": 0.5 + 0.1 * i,
                 "http_code": 200, "ok": True} for i in range(5)]
               + [{"fetch": "f5", "t": 5.0, "http_code": None, "ok": False}])
    # UDP: seqs 0..99 sent every 10 ms, 1000 B each, every 10th lost, latency 30 ms
    w.add_rows("udp", SERIES_COLUMNS["udp"],
               [("u1", s, s * 0.01, s * 0.01 + 0.03, 1000) for s in range(100) if s % 10 != 5])
    w.close("ok")
    return load_run(path)


def _by_key(rows):
    return {(r["scope"], r["name"], r["metric"]): r["value"] for r in rows}


def test_link_metrics_queueing_delay_and_utilization(tmp_path):
    run = _write_run(tmp_path / "r")
    got = _by_key(metrics_queue.link_metrics(run))
    name = "s0-eth2:pfifo"
    assert not any(k[1].endswith("htb") for k in got)  # the shaper is not the AQM leaf
    assert got[("link", name, "qdelay_mean_ms")] == pytest.approx(8 * 15000 / 1.5e6 * 1e3)
    assert got[("link", name, "qdelay_p99_ms")] == pytest.approx(80.0)
    assert got[("link", name, "qlen_p95_pkts")] == 10
    assert got[("link", name, "backlog_mean_bytes")] == 15000
    assert got[("link", name, "utilization")] == pytest.approx(0.5, rel=1e-5)
    assert got[("link", name, "drops")] == 10
    assert got[("link", name, "drops_per_s")] == pytest.approx(1.0)
    # the counter steps by one drop every 0.5 s, within one 0.1 s sample interval
    assert got[("link", name, "drops_per_s_max")] == pytest.approx(10.0)
    assert got[("link", name, "drop_pct")] == pytest.approx(100 * 10 / 610)
    assert ("link", name, "marks") not in got  # not reported by this qdisc
    assert metrics_queue.queue_delay_ms(15000, 1.5) == pytest.approx(80.0)


def test_warmup_excludes_the_first_seconds(tmp_path):
    run = _write_run(tmp_path / "r")
    full = _by_key(m.compute_metrics(run))
    warm = _by_key(m.compute_metrics(run, warmup_s=5.0))
    srtt = ("flow", "h1-1", "srtt_mean_ms")
    assert 10 < full[srtt] < 100 and warm[srtt] == pytest.approx(100.0)
    assert warm[("flow", "h1-1", "cwnd_p50_pkts")] == 20
    # counters differenced from the sample at the cut
    assert full[("flow", "h1-1", "retrans_pkts")] == 3
    assert warm[("flow", "h1-1", "retrans_pkts")] == 0
    assert full[("link", "s0-eth2:pfifo", "drops")] == 10
    assert warm[("link", "s0-eth2:pfifo", "drops")] == 0
    # throughput is steady, so warm-up leaves it
    assert warm[("flow", "h1-1", "acked_throughput_mbit")] == pytest.approx(1.0, rel=1e-5)
    # pings from t >= 5 s: rtts 51..100 and the 4 lost
    assert warm[("ping", "h1", "rtt_p50_ms")] == pytest.approx(75.5)
    assert warm[("ping", "h1", "loss_pct")] == pytest.approx(100 * 4 / 54)
    with pytest.raises(ValueError):
        m.compute_metrics(run, warmup_s=-1)


def test_warmup_counts_from_the_start_of_traffic(tmp_path):
    run = _write_run(tmp_path / "r")
    assert m.traffic_start_s(run) == 0.0
    run.record["traffic_start_s"] = 5.0
    warm = _by_key(m.compute_metrics(run, warmup_s=0.5))
    assert warm[("flow", "h1-1", "srtt_mean_ms")] == pytest.approx(100.0)


def test_udp_loss_jitter_latency(tmp_path):
    run = _write_run(tmp_path / "r")
    got = _by_key(metrics_latency.udp_metrics(run))
    assert got[("udp", "u1", "loss_pct")] == pytest.approx(10.0)
    assert got[("udp", "u1", "jitter_ms")] == pytest.approx(0.0, abs=1e-9)
    assert got[("udp", "u1", "owd_mean_ms")] == pytest.approx(30.0)
    assert got[("udp", "u1", "owd_p99_ms")] == pytest.approx(30.0)
    # 89 packets after the first arrival (t_recv 0.03 .. 1.02 s) of 1000 B
    assert got[("udp", "u1", "throughput_mbit")] == pytest.approx(89 * 8000 / 0.99 / 1e6)
    # the sender's count from the stream's summary: 90 received of 120 sent
    run2 = _write_run(tmp_path / "r2", traffic_results=[
        {"name": "u1", "kind": "UdpStream", "stream": "u1", "sent": 120, "received": 90}])
    assert _by_key(metrics_latency.udp_metrics(run2))[("udp", "u1", "loss_pct")] \
        == pytest.approx(25.0)


def test_ping_and_web(tmp_path):
    run = _write_run(tmp_path / "r")
    got = _by_key(metrics_latency.ping_metrics(run))
    assert got[("ping", "h1", "rtt_p50_ms")] == pytest.approx(50.5)
    assert got[("ping", "h1", "rtt_p95_ms")] == pytest.approx(95.05)
    assert got[("ping", "h1", "rtt_p99_ms")] == pytest.approx(99.01)
    assert got[("ping", "h1", "rtt_mean_ms")] == pytest.approx(50.5)
    assert got[("ping", "h1", "rtt_max_ms")] == 100
    assert got[("ping", "h1", "loss_pct")] == pytest.approx(100 * 4 / 104)
    web = _by_key(metrics_latency.web_metrics(run))
    totals = [0.5, 0.6, 0.7, 0.8, 0.9]
    assert web[("web", "all", "fetches")] == 6
    assert web[("web", "all", "failures")] == 1
    assert web[("web", "all", "total_mean_s")] == pytest.approx(0.7)
    assert web[("web", "all", "total_std_s")] == pytest.approx(np.std(totals))
    assert web[("web", "all", "total_p95_s")] == pytest.approx(0.88)


def test_web_ok_column_as_words(tmp_path):
    w = RunWriter(tmp_path / "r")
    w.add_rows("web", ["fetch", "t", "total_s", "ok"],
               [("a", 0.0, 1.0, "true"), ("b", 1.0, 3.0, "True"), ("c", 2.0, "", "false")])
    w.close("ok")
    got = _by_key(metrics_latency.web_metrics(load_run(tmp_path / "r")))
    assert got[("web", "all", "failures")] == 1
    assert got[("web", "all", "total_mean_s")] == pytest.approx(2.0)


def test_iperf_flows(tmp_path):
    w = RunWriter(tmp_path / "r")
    w.add_rows("iperf", SERIES_COLUMNS["iperf"],
               [{"flow": "a", "t_start": 2.0 + i, "t_end": 3.0 + i, "bytes": b,
                 "bits_per_second": b * 8, "retransmits": 1}
                for i, b in enumerate([100000, 300000, 100000, 300000])]
               + [{"flow": "b", "t_start": 2.0 + i, "t_end": 3.0 + i, "bytes": 200000,
                   "bits_per_second": 1.6e6, "retransmits": 0} for i in range(2)])
    w.close("ok")
    rows, thr = metrics_flows.flow_metrics(load_run(tmp_path / "r"))
    got = _by_key(rows)
    assert got[("flow", "a", "throughput_mbit")] == pytest.approx(1.6)
    assert got[("flow", "a", "throughput_cov")] == pytest.approx(0.5)  # 0.8/2.4 Mbit/s
    assert got[("flow", "a", "retransmits")] == 4
    assert got[("flow", "a", "fct_s")] == pytest.approx(4.0)
    assert got[("flow", "b", "fct_s")] == pytest.approx(2.0)
    assert thr == pytest.approx({"a": 1.6, "b": 1.6})
    net = _by_key(metrics_flows.network_metrics(thr))
    assert net[("network", "all", "jain_fairness")] == pytest.approx(1.0)
    assert net[("network", "all", "aggregate_throughput_mbit")] == pytest.approx(3.2)
    # warm-up: intervals starting at or after traffic start (2 s) + 2 s
    rows, thr = metrics_flows.flow_metrics(load_run(tmp_path / "r"), cutoff_s=4.0)
    assert thr["a"] == pytest.approx(1.6) and "b" not in thr


def test_compute_and_write_metrics(tmp_path):
    run = _write_run(tmp_path / "r")
    rows = m.compute_metrics(run)
    got = _by_key(rows)
    assert {r["scope"] for r in rows} == {"flow", "link", "network", "web", "ping", "udp"}
    assert all(set(r) == set(m.FIELDS) for r in rows)
    assert got[("flow", "h1-1", "acked_throughput_mbit")] == pytest.approx(1.0, rel=1e-5)
    assert got[("flow", "h2-1", "acked_throughput_mbit")] == pytest.approx(0.5, rel=1e-5)
    assert got[("flow", "h1-1", "acked_throughput_cov")] == pytest.approx(0.0, abs=1e-5)
    assert got[("flow", "h1-1", "fct_s")] == pytest.approx(10.0)
    assert got[("network", "all", "flows")] == 2
    assert got[("network", "all", "aggregate_throughput_mbit")] == pytest.approx(1.5, rel=1e-5)
    assert got[("network", "all", "jain_fairness")] == pytest.approx(
        1.5 ** 2 / (2 * (1 + 0.25)), rel=1e-5)
    csv_path, json_path = m.write_metrics(run, rows, warmup_s=0.0)
    with open(csv_path) as f:
        back = list(csv.DictReader(f))
    assert len(back) == len(rows)
    assert [(r["scope"], r["name"], r["metric"], float(r["value"]), r["unit"]) for r in back] \
        == [(r["scope"], r["name"], r["metric"], r["value"], r["unit"]) for r in rows]
    doc = json.loads(open(json_path).read())
    assert doc["metrics"] == rows and doc["warmup_s"] == 0.0 and doc["schema_version"] == 2
    table = m.format_table(rows)
    lines = table.splitlines()
    assert lines[0].split() == ["scope", "name", "metric", "value", "unit"]
    assert len(lines) == len(rows) + 2
    assert any("jain_fairness" in line and "0.9" in line for line in lines)
    # a path works too, and an empty run has no metrics
    assert _by_key(m.compute_metrics(str(tmp_path / "r"))) == got
    RunWriter(tmp_path / "empty").close("ok")
    assert m.compute_metrics(load_run(tmp_path / "empty")) == []


def test_bottleneck_dev_selects_the_link(tmp_path):
    run = _write_run(tmp_path / "r")
    run.record["bottleneck_dev"] = ["s0", "s0-eth2"]  # (namespace, dev) works too
    assert {k[1] for k in _by_key(metrics_queue.link_metrics(run))} == {"s0-eth2:pfifo"}
    assert metrics_queue.link_direction(run.record, "s0-eth2:pfifo") == "up"
    run.record["bottleneck_dev"] = "s0-eth9"
    assert metrics_queue.link_direction(run.record, "s0-eth2:pfifo") == "down"


def test_reverse_aqm_reported_at_the_reverse_rate(tmp_path):
    """B's router runs PIE both ways: the receiver's egress (h2-eth0) is sampled too and
    has link metrics of its own, at the reverse link's rate; the bottleneck's come
    first."""
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": 10.0, "reverse_mbit": 5.0},
                    bottleneck_dev="s0-eth2")
    rows = []
    for ti in np.arange(0, 10.01, 0.1):
        for dev, sent_mbit, backlog in (("h2-eth0", 4.0, 25000), ("s0-eth2", 9.0, 12500)):
            rows.append({"t": ti, "dev": dev, "handle": "10:", "parent": "1:1",
                         "kind": "pie", "qlen_pkts": 10, "backlog_bytes": backlog,
                         "sent_bytes": round(ti * sent_mbit * 1e6 / 8), "drops": 0})
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], rows)
    w.close("ok")
    run = load_run(w.dir)
    got = _by_key(metrics_queue.link_metrics(run))
    assert [k[1] for k in got][0] == "s0-eth2:pie"
    assert got[("link", "s0-eth2:pie", "utilization")] == pytest.approx(0.9, rel=1e-4)
    assert got[("link", "h2-eth0:pie", "utilization")] == pytest.approx(0.8, rel=1e-4)
    # 12 500 B at 10 Mbit/s = 10 ms; 25 000 B at 5 Mbit/s = 40 ms
    assert got[("link", "s0-eth2:pie", "qdelay_p50_ms")] == pytest.approx(10.0)
    assert got[("link", "h2-eth0:pie", "qdelay_p50_ms")] == pytest.approx(40.0)
    assert [metrics_queue.link_direction(run.record, k[1]) for k in got][-1] == "down"
    assert metrics_queue.link_rate_mbit(run, "h2-eth0") == 5.0
    assert metrics_queue.link_rate_mbit(run, "s0-eth2") == 10


def test_link_metrics_end_with_the_traffic_not_with_the_sampler(tmp_path):
    """A 10 s run whose traffic starts at 1 s and fills a 10 Mbit/s link (a 12 500 B
    queue) until 11 s; the sampler goes on 5 s more while the tools stop, the link idle
    and empty (as NetPerfMeter's results upload, measured 4-7 s). The run's metrics
    judge the traffic's time only: utilization 1 and a 10 ms queue, not 10/14 and the
    idle samples' zeros (a D run read 0.92 for a link busy all its 60 s)."""
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": 10.0}, bottleneck_dev="s0-eth2",
                    duration_s=10, traffic_start_s=1.0, warmup_s=2.0)
    rows = []
    for ti in np.arange(0, 16.001, 0.1):
        busy = 1.0 <= ti <= 11.0 + 1e-9
        sent = round((min(max(ti, 1.0), 11.0) - 1.0) * 10e6 / 8)
        rows.append({"t": round(ti, 3), "dev": "s0-eth2", "handle": "10:", "parent": "1:1",
                     "kind": "pfifo", "qlen_pkts": 9 if busy else 0,
                     "backlog_bytes": 12500 if busy else 0, "sent_bytes": sent, "drops": 0})
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], rows)
    w.close("ok")
    run = load_run(w.dir)
    assert m.traffic_end_s(run) == 11.0
    got = _by_key(m.compute_metrics(run, warmup_s=2.0))
    assert got[("link", "s0-eth2:pfifo", "utilization")] == pytest.approx(1.0, rel=1e-6)
    assert got[("link", "s0-eth2:pfifo", "qdelay_mean_ms")] == pytest.approx(10.0)
    # without the end: the idle tail's samples dilute both
    whole = _by_key(metrics_queue.link_metrics(run, cutoff_s=3.0))
    assert whole[("link", "s0-eth2:pfifo", "utilization")] == pytest.approx(8 / 13, rel=1e-3)
    assert whole[("link", "s0-eth2:pfifo", "qdelay_mean_ms")] < 7
    run.record["duration_s"] = None
    assert m.traffic_end_s(run) == math.inf


def test_a_varying_link_drains_its_queue_at_the_rate_of_the_moment(tmp_path):
    """A square wave (2 s at 2 Mbit/s, 2 s at 8) holding a constant 10 000 B queue: its
    delay is 40 ms while the loop had set 2 Mbit/s and 10 ms at 8 (mean 25 ms), not
    16 ms at the 5 Mbit/s mean; the link sending at the rate of the moment is
    utilization 1, against the samples' mean rate. Before the loop's first change the
    configured rate holds."""
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": 5.0}, bottleneck_dev="s0-eth2")
    ticks, rows, sent = [], [], 0.0
    for i in range(800):                       # the loop, every 10 ms from 1 s
        ti = 1.0 + i * 0.01
        ticks.append({"t_s": round(ti, 3), "window": i, "rate_bps":
                      2_000_000 if (i // 200) % 2 == 0 else 8_000_000, "sent_bytes": 0,
                      "backlog_bytes": 10000, "qlen_pkts": 7, "drops": 0})
    with open(tmp_path / "r" / "series" / "link-trace.csv", "w") as f:
        f.write(",".join(ticks[0]) + "\n")
        f.writelines(",".join(str(v) for v in r.values()) + "\n" for r in ticks)
    for i in range(900):                       # the sampler, every 10 ms from 0.005 s
        ti = 0.005 + i * 0.01
        rate = 5e6 if ti < 1.0 else ticks[min(int((ti - 1.0) / 0.01), 799)]["rate_bps"]
        rows.append({"t": round(ti, 3), "dev": "s0-eth2", "handle": "10:", "parent": "1:1",
                     "kind": "pfifo", "qlen_pkts": 7, "backlog_bytes": 10000,
                     "sent_bytes": round(sent), "drops": 0})
        sent += rate * 0.01 / 8
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], rows)
    w.close("ok")
    run = load_run(w.dir)
    at = metrics_queue.varying_rate_mbit(run, "s0-eth2")
    assert list(at([0.5, 1.0, 2.995, 3.0, 5.5])) == [5.0, 2.0, 2.0, 8.0, 2.0]
    assert metrics_queue.varying_rate_mbit(run, "h2-eth0") is None   # the way back
    got = _by_key(metrics_queue.link_metrics(run, cutoff_s=1.0))
    name = "s0-eth2:pfifo"
    assert got[("link", name, "qdelay_p95_ms")] == pytest.approx(40.0)
    assert got[("link", name, "qdelay_max_ms")] == pytest.approx(40.0)
    assert got[("link", name, "qdelay_mean_ms")] == pytest.approx(25.0, abs=0.2)
    assert got[("link", name, "utilization")] == pytest.approx(1.0, abs=0.01)
    # 10 000 B drain in 40 ms at 2 Mbit/s, 10 ms at 8; from 2.975 s the first three
    # 10 ms steps go at 2 Mbit/s (7 500 B), the fourth at 8: 40 ms, not 50
    assert metrics_queue.drain_at_s(run, 1.5) == pytest.approx(0.04)
    assert metrics_queue.drain_at_s(run, 3.505) == pytest.approx(0.01)
    assert metrics_queue.drain_at_s(run, 2.975) == pytest.approx(0.04)
    assert metrics_queue.drain_at_s(run, 0.5) == pytest.approx(0.016, abs=0.01)
    # the rate given overrides the series (a caller's fixed rate), as on a constant link
    fixed = _by_key(metrics_queue.link_metrics(run, cutoff_s=1.0, rate_mbit=5.0))
    assert fixed[("link", name, "qdelay_mean_ms")] == pytest.approx(16.0)


def test_link_without_rate_skips_rate_metrics(tmp_path):
    run = _write_run(tmp_path / "r")
    run.record["params"] = {}
    got = _by_key(metrics_queue.link_metrics(run))
    assert ("link", "s0-eth2:pfifo", "qlen_mean_pkts") in got
    assert not any(k[2].startswith("qdelay") or k[2] == "utilization" for k in got)
    got = _by_key(metrics_queue.link_metrics(run, rate_mbit=3.0))
    assert got[("link", "s0-eth2:pfifo", "qdelay_mean_ms")] == pytest.approx(40.0)


def test_count_changes_counts_ssthresh_reactions():
    from bufferbloat.results.metrics_flows import count_changes
    nan = float("nan")
    assert count_changes([nan, nan, 40, 40, 20, 20, 20, 10]) == 3
    assert count_changes([nan, nan, nan]) == 0
    assert count_changes([7]) == 0 and count_changes([]) == 0
