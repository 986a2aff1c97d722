"""Study E's metrics (bufferbloat/results/flowmetrics.py) on hand-made series with known answers."""
import json
import math

import numpy as np
import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.results import flowmetrics as fm
from bufferbloat.results import metrics as m
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter

# ----------------------------------------------------------------------------- helpers

def test_interval_rates():
    t_end, rate = fm.interval_rates([0, 1, 2, 3, 3], [0, 10, 30, 30, 31])
    assert t_end.tolist() == [1, 2, 3] and rate.tolist() == [10, 20, 0]
    # a reset counts from its new value; NaN samples are skipped
    t_end, rate = fm.interval_rates([0, 1, 2, 3], [0, 50, float("nan"), 5])
    assert rate.tolist() == [50, 2.5]


def test_interdeparture_constant_rate_is_the_gap():
    # 10 segments every 10 ms: a segment every 1 ms
    t = np.arange(0, 1.0001, 0.01)
    assert fm.interdeparture_ewma_ms(t, 10 * np.arange(t.size)) == pytest.approx(1.0)


def test_interdeparture_idle_time_goes_to_the_next_gap():
    # 10 segments in [0, 1], none in [1, 2], 10 in [2, 3]: gaps 0.1 s, then 2 s / 10
    a = 1 / 8
    second = 0.2 + (1 - a) ** 10 * (0.1 - 0.2)
    got = fm.interdeparture_ewma_ms([0, 1, 2, 3], [0, 10, 10, 20])
    assert got == pytest.approx((0.1 + second) / 2 * 1e3)
    assert math.isnan(fm.interdeparture_ewma_ms([0, 1], [5, 5]))


def test_recovery_episodes_and_rto_count():
    t = np.arange(10) * 0.01
    ca = [0, 0, 3, 3, 0, 4, 4, 4, 0, 3]  # 20 ms of recovery, 30 ms of loss, one open
    assert fm.recovery_episodes_s(t, ca) == pytest.approx([0.02, 0.03])
    # CWR (2) and disorder (1) are not loss recovery; an episode under way at the first
    # sample is not whole
    assert fm.recovery_episodes_s(t[:6], [3, 3, 0, 2, 1, 0]) == []
    assert fm.recovery_episodes_s(t[:5], [0, 3, 4, 3, 0]) == pytest.approx([0.03])
    assert fm.rto_count([0, 4, 4, 0, 3, 4, 0, 4]) == 3   # recovery -> loss is an RTO too
    assert fm.rto_count([4, 4, 0]) == 0                  # the first sample is no entry
    assert fm.rto_count([0, float("nan"), 4]) == 1


def test_utilities():
    assert fm.utility_pf(math.e) == pytest.approx(1.0)
    assert fm.utility_pf(1.0) == 0.0
    assert fm.utility_mpd(2.0) == -0.5
    assert fm.utility_pf(0) == -math.inf and fm.utility_mpd(0) == -math.inf


@pytest.mark.parametrize("k", [1, 2, 5, 10, 20])
def test_entropy_of_equal_shares_is_ln_k(k):
    assert fm.entropy_fairness([3.7] * k) == pytest.approx(math.log(k))


def test_entropy_unequal_and_degenerate():
    assert fm.entropy_fairness([1, 3]) == pytest.approx(-(0.25 * math.log(0.25)
                                                          + 0.75 * math.log(0.75)))
    assert fm.entropy_fairness([5, 0, 0]) == 0.0
    assert math.isnan(fm.entropy_fairness([0, 0]))
    with pytest.raises(ValueError):
        fm.entropy_fairness([])
    with pytest.raises(ValueError):
        fm.entropy_fairness([1, -1])


def test_common_rates_and_product_fairness():
    t = np.arange(0, 2.001, 0.1)
    rates = fm.common_rates([(t, 2 * t), (t + 0.05, 3 * (t + 0.05))], 0.1, 2.0, 0.1)
    assert rates.shape == (19, 2)
    assert rates[:, 0] == pytest.approx(2) and rates[:, 1] == pytest.approx(3)
    assert fm.product_fairness(rates) == pytest.approx(6)
    # per sample, not of the means: rates (1, 3) then (3, 1) give 3, not 2 x 2 = 4
    assert fm.product_fairness([[1, 3], [3, 1]]) == 3
    assert math.isnan(fm.product_fairness(np.empty((0, 2))))


def test_base_rtt_and_bdp():
    rec = {"network": {"topology": {"links": [
        {"a": "h1", "b": "s0", "ab": {"delay_ms": 2}, "ba": {"delay_ms": 2}},
        {"a": "h2", "b": "s0", "ab": {"delay_ms": 10}, "ba": {"delay_ms": 10}},
        {"a": "s0", "b": "h3", "ab": {"delay_ms": 3}, "ba": {"delay_ms": 3},
         "bottleneck": True}]}}}
    assert fm.sender_base_rtt_ms(rec, "h1") == 10
    assert fm.sender_base_rtt_ms(rec, "h2") == 26
    assert fm.sender_base_rtt_ms({"base_rtt_ms": 40}, "h1") == 40
    assert fm.sender_base_rtt_ms({}, "h1") is None
    # 10 Mbit/s x 20 ms = 25 000 B = 20 segments of 1250 B
    assert fm.bdp_pkts(10, 20, 1250) == pytest.approx(20)


# ----------------------------------------------------------------------------- a run

RATE = 10.0          # Mbit/s
MSS = 1250           # bytes: BDP (10 Mbit/s x 20 ms) = 20 segments
FLOWS = {"h1-1": 1.0, "h2-1": 3.0}   # Mbit/s after the warm-up


def _links():
    return [{"a": h, "b": "s0", "rate_mbit": 1000, "ab": {"delay_ms": 5},
             "ba": {"delay_ms": 5}, "bottleneck": False} for h in ("h1", "h2")] + \
        [{"a": "s0", "b": "h3", "rate_mbit": RATE, "ab": {"delay_ms": 5},
          "ba": {"delay_ms": 5}, "bottleneck": True}]


def _write_run(path):
    """10 s, two flows sampled every 0.1 s; during the first 2 s (the warm-up) every
    quantity is different, so that a metric that ignored the cut would be wrong.

    After the cut: in-flight alternates 10/30 (mean 20, CoV 0.5), delivery rate 8 Mbit/s,
    srtt 30 ms over a min RTT of 20 ms, flow rates 1 and 3 Mbit/s, 10 data segments every
    0.1 s (a segment every 10 ms), bytes sent at twice the acked rate, and the ca_state
    pattern open, recovery x2, open, loss x3, open repeating every 0.7 s."""
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": RATE}, traffic_start_s=0.0,
                    network={"topology": {"links": _links()}})
    t = np.round(np.arange(0, 10.0001, 0.1), 6)
    pattern = [0, 3, 3, 0, 4, 4, 4]
    rows = []
    for flow, mbit in FLOWS.items():
        acked = sent = segs = 0.0
        for i, ti in enumerate(t):
            warm = ti < 2.0
            if i:
                acked += (0.5 if warm else mbit) * 1e6 / 8 * 0.1
                sent += 2 * (0.5 if warm else mbit) * 1e6 / 8 * 0.1
                segs += 1 if warm else 10
            rows.append({"t": ti, "flow": flow, "host": flow[:2], "cca": "reno",
                         "cwnd_pkts": 40, "srtt_us": 200_000 if warm else 30_000,
                         "min_rtt_us": 20_000, "mss_bytes": MSS,
                         "in_flight_pkts": 100 if warm else (10 if i % 2 else 30),
                         "delivery_rate_bps": 1e6 if warm else 8e6,
                         "bytes_acked": round(acked), "bytes_sent": round(sent),
                         "data_segs_out": segs, "retrans_total": 0,
                         "ca_state": 0 if warm else pattern[(i - 20) % 7]})
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], rows)
    w.close("ok")
    return load_run(path)


def _by_key(rows):
    return {(r["scope"], r["name"], r["metric"]): r for r in rows}


def test_study_metrics_of_a_run(tmp_path):
    run = _write_run(tmp_path / "r")
    rows = _by_key(m.compute_metrics(run, warmup_s=2.0))

    def v(name, metric, scope="flow"):
        return rows[(scope, name, metric)]["value"]

    # kept samples: i = 20..100 (t >= 2.0): in-flight 30 at even i (41), 10 at odd (40)
    inflight = np.array([30 if i % 2 == 0 else 10 for i in range(20, 101)])
    for flow, mbit in FLOWS.items():
        assert v(flow, "throughput_mbit") == pytest.approx(mbit, rel=1e-5)
        assert v(flow, "inflight_mean_pkts") == pytest.approx(1630 / 81)
        assert v(flow, "inflight_cov") == pytest.approx(np.std(inflight) / np.mean(inflight))
        assert v(flow, "delivery_rate_mean_mbit") == pytest.approx(8)
        assert v(flow, "qdelay_est_mean_ms") == pytest.approx(10)
        assert v(flow, "interdeparture_ewma_ms") == pytest.approx(10)
        assert v(flow, "sending_rate_mbit") == pytest.approx(2 * mbit, rel=1e-5)
        # power: x / srtt per sample = mbit / 0.03 s
        assert v(flow, "power_mean") == pytest.approx(mbit / 0.03, rel=1e-4)
        assert v(flow, "utility_pf") == pytest.approx(math.log(mbit), abs=1e-5)
        assert v(flow, "utility_mpd") == pytest.approx(-1 / mbit, rel=1e-5)
        assert v(flow, "bw_utilization") == pytest.approx(mbit / RATE, rel=1e-5)
        # in-flight of a 20-segment BDP (10 Mbit/s x 20 ms / 1250 B)
        assert v(flow, "bdp_utilization_mean") == pytest.approx(1630 / 81 / 20)
        # k = i - 20 = 0..80 in 0.7 s cycles [0,3,3,0,4,4,4]: 11 whole cycles (each a
        # 0.2 s recovery and a 0.3 s loss episode, the loss ending at the next cycle's
        # first sample), then [0,3,3,0]: one more recovery; 11 entries into loss
        assert v(flow, "recovery_episodes") == 23
        assert v(flow, "recovery_time_mean_ms") == pytest.approx(
            (12 * 0.2 + 11 * 0.3) / 23 * 1e3)
        assert v(flow, "rto_count") == 11
        assert rows[("flow", flow, "power_mean")]["unit"] == "Mbit/s/s"
    x = list(FLOWS.values())
    assert v("all", "throughput_sum_mbit", "network") == pytest.approx(4, rel=1e-5)
    assert v("all", "inflight_sum_pkts", "network") == pytest.approx(2 * 1630 / 81)
    assert v("all", "utility_pf_sum", "network") == pytest.approx(math.log(3), abs=1e-5)
    assert v("all", "utility_mpd_sum", "network") == pytest.approx(-1 - 1 / 3, rel=1e-5)
    assert v("all", "entropy_fairness", "network") == pytest.approx(
        fm.entropy_fairness(x), rel=1e-5)
    assert v("all", "product_fairness", "network") == pytest.approx(3, rel=1e-4)
    assert rows[("network", "all", "product_fairness")]["unit"] == "(Mbit/s)^2"
    assert v("all", "bw_utilization", "network") == pytest.approx(0.4, rel=1e-5)
    assert v("all", "bdp_utilization", "network") == pytest.approx(2 * 1630 / 81 / 20)
    # without the warm-up cut, the first 2 s change them (the cut is honoured)
    raw = _by_key(m.compute_metrics(run))
    assert raw[("flow", "h1-1", "inflight_mean_pkts")]["value"] > 30
    assert raw[("flow", "h1-1", "qdelay_est_mean_ms")]["value"] > 40


def test_every_metric_has_a_unit_and_the_aliases_are_written(tmp_path):
    run = _write_run(tmp_path / "r")
    rows = m.compute_metrics(run, warmup_s=2.0)
    assert all("unit" in r and isinstance(r["unit"], str) for r in rows)
    _, path = m.write_metrics(run, rows, warmup_s=2.0)
    doc = json.loads(open(path).read())
    assert doc["aliases"]["srtt_mean_ms"] == "mean_srtt_l4"
    assert doc["aliases"]["inflight_mean_pkts"] == "mean_inflight_l4"
    assert doc["aliases"]["entropy_fairness"] == "entropy_fairness_net"
    table = fm.study_table(rows)
    assert table[("flow", "h2-1")]["mean_throughput_l4"] == pytest.approx(3, rel=1e-5)
    assert table[("network", "all")]["sum_inflight_net"] == pytest.approx(2 * 1630 / 81)
    # one study name per metric and scope: the table is a mapping, not a guess
    names = [(scope, alias) for (scope, metric), alias in fm.ALIASES.items()
             if metric != "sent_throughput_mbit"]
    assert len(names) == len(set(names))


def test_old_runs_without_the_new_columns(tmp_path):
    """A tcp.csv without min_rtt_us / data_segs_out / bytes_sent / ca_state: the metrics
    that need them are absent (never 0), the queueing delay uses the smallest srtt."""
    w = RunWriter(tmp_path / "old")
    w.record.update(params={"bottleneck_mbit": RATE})
    cols = ["t", "flow", "host", "srtt_us", "cwnd_pkts", "bytes_acked", "in_flight_pkts"]
    w.add_rows("tcp", cols, [{"t": i * 0.1, "flow": "f", "host": "h1",
                              "srtt_us": 20_000 + 1000 * (i % 3), "bytes_acked": 1000 * i,
                              "cwnd_pkts": 10,
                              "in_flight_pkts": 5} for i in range(50)])
    w.close("ok")
    got = {r["metric"]: r["value"] for r in m.compute_metrics(load_run(tmp_path / "old"))}
    assert got["qdelay_est_mean_ms"] == pytest.approx(np.mean([0, 1, 2] * 16 + [0, 1]))
    for absent in ("interdeparture_ewma_ms", "sending_rate_mbit", "rto_count",
                   "recovery_time_mean_ms", "bdp_utilization_mean"):
        assert absent not in got


def test_application_rows_of_a_netperfmeter_flow(tmp_path):
    """npm_msg: a 1000-byte message every 10 ms for 10 s, 30 ms one-way (50 ms for those
    sent before 1.9 s, all received before the 2 s cut); npm: the active node wrote
    125 000 B per 1 s interval (1 Mbit/s)."""
    w = RunWriter(tmp_path / "npm")
    w.record.update(params={"bottleneck_mbit": RATE}, traffic_start_s=0.0)
    msgs = [{"flow": "s", "seq": i, "t_sent": i * 0.01,
             "t_recv": i * 0.01 + (0.05 if i * 0.01 < 1.9 else 0.03), "size_bytes": 1000}
            for i in range(1001)]
    w.add_rows("npm_msg", SERIES_COLUMNS["npm_msg"], msgs)
    w.add_rows("npm", SERIES_COLUMNS["npm"],
               [{"flow": "s", "node": node, "t_start": float(i), "t_end": i + 1.0,
                 "sent_bytes": 125_000 if node == "active" else 0,
                 "received_bytes": 0 if node == "active" else 100_000, "lost_bytes": 0}
                for i in range(10) for node in ("active", "passive")])
    w.close("ok")
    got = {r["metric"]: r for r in m.compute_metrics(load_run(tmp_path / "npm"),
                                                     warmup_s=2.0)}
    assert got["owd_mean_ms"]["value"] == pytest.approx(30)
    assert got["owd_max_ms"]["value"] == pytest.approx(30)
    assert got["owd_mean_ms"]["unit"] == "ms"
    # 1000 B every 10 ms = 0.8 Mbit/s at the receiver (803 messages after the one at
    # the cut, t_recv 2.0, to the last at 10.03 s); 1 Mbit/s written by the sender
    assert got["app_throughput_mbit"]["value"] == pytest.approx(0.8)
    assert got["app_sending_rate_mbit"]["value"] == pytest.approx(1.0)
    assert fm.ALIASES[("flow", "owd_mean_ms")] == "mean_owd_l7"


def test_npm_delay_splits_into_send_buffer_path_and_rest(tmp_path):
    """docs/reference/one-way-delay.md on a made-up flow whose numbers are known: a 10 Mbit/s bottleneck
    holding 25,000 B (20 ms), a base RTT of 40 ms (20 ms one way), messages of 1448 B
    stamped when written and first sent 300 ms later (the highest byte sent trails the
    written stream by 300 ms), each received 15 ms after the path's delay (the rest).
    The three parts come back: 300 ms, 20 + 20 + 1.16 ms, 15 ms (within the 10 ms
    sampling's interpolation)."""
    from bufferbloat.core.series import SERIES_COLUMNS
    from bufferbloat.results import flowmetrics as fm
    from bufferbloat.results.records import load_run
    from bufferbloat.results.records_writer import RunWriter
    rate, size, wait_s, rest_s, one_way_s = 10.0, 1448, 0.300, 0.015, 0.020
    w = RunWriter(str(tmp_path / "r"))
    w.record.update(params={"bottleneck_mbit": rate}, bottleneck_dev="s0-eth2",
                    base_rtt_ms=40.0)
    per_s = rate * 1e6 / 8 * 0.9                    # the application writes at 9 Mbit/s
    t = np.arange(0, 20, 0.01)
    # bytes written by t: per_s * t; the highest byte sent: what was written 300 ms ago
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], [
        {"t": ti, "flow": "bulk", "host": "h1", "cca": "cubic",
         "bytes_sent": round(fm.NPM_STREAM_OFFSET + max(0.0, ti - wait_s) * per_s) + 7000,
         "bytes_retrans": 7000} for ti in t])
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": ti, "dev": "s0-eth2", "handle": "10:", "kind": "pie",
         "backlog_bytes": 25000} for ti in t])
    msgs = []
    for k in range(1, 2000):
        end = k * size
        t_sent = end / per_s                         # written (stamped) at this time
        t_path = one_way_s + (25000 + size) * 8 / (rate * 1e6)
        msgs.append({"flow": "bulk", "seq": k, "t_sent": t_sent, "size_bytes": size,
                     "abs_bytes": end, "t_recv": t_sent + wait_s + t_path + rest_s})
    w.add_rows("npm_msg", SERIES_COLUMNS["npm_msg"], msgs)
    w.close("ok")
    run = load_run(str(tmp_path / "r"))
    msg = run.series("npm_msg")
    keep = (msg["t_sent"] > 1) & (msg["t_sent"] < 15)
    wait, path, rest = (v[keep] for v in fm.delay_parts(run, "bulk", msg["flow"] == "bulk"))
    assert np.median(wait) == pytest.approx(300, abs=0.5)
    assert np.median(path) == pytest.approx(20 + 20 + 1.1584, abs=0.05)
    assert np.median(rest) == pytest.approx(15, abs=0.5)
    assert np.all(np.isfinite(wait)) and np.all(np.isfinite(path))
    rows = fm.app_rows(run, cutoff_s=1.0)
    names = {r["metric"] for r in rows}
    assert {"sndbuf_wait_p50_ms", "path_owd_p50_ms", "owd_rest_p50_ms"} <= names
    # an older run (no abs_bytes): the tool's delay alone, no parts
    assert fm.delay_parts(run, "nosuchflow", msg["flow"] == "x") is None
