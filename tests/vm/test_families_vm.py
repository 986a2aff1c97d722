"""Every experiment family end to end in the project VM (quick profile, short runs), each
showing its study's known qualitative outcome. Rates above what the TCG VM sustains are
scaled (bufferbloat.engine.TCG_MAX_MBIT) with buffers scaled alike, so delays stay the
study's. Each assertion states its margin; they are qualitative by design (the studies'
own claims), with margins wide enough for one short run and narrow enough that the
opposite outcome fails.
"""
import json
import os

import numpy as np
import pytest

from bufferbloat.engine import run_point
from bufferbloat.results import load_run
from scenarios import catalogue

CAT = catalogue()
_RUNS = {}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("families"))


def run(out, name, time_s, **overrides):
    """Run (once per module) and return (run, metrics rows)."""
    key = (name, time_s, tuple(sorted(overrides.items())))
    if key not in _RUNS:
        run_dir = run_point(CAT[name], overrides, duration_s=time_s, out_root=out,
                            quick=True, log=print)
        with open(os.path.join(run_dir, "metrics.json")) as f:
            _RUNS[key] = (load_run(run_dir), json.load(f)["metrics"])
        assert _RUNS[key][0].record["status"] == "ok"
    return _RUNS[key]


def metric(rows, scope, name_part, metric_name):
    vals = [r["value"] for r in rows if r["scope"] == scope and name_part in r["name"]
            and r["metric"] == metric_name]
    assert vals, f"no {scope}/{name_part}/{metric_name} in {len(rows)} rows"
    return vals[0]


def test_a_fifo100_rtt_far_above_fifo20_and_pie_holds_its_target(out):
    _, f20 = run(out, "a1_fifo", 15, buffer_pkts=20)
    _, f100 = run(out, "a1_fifo", 15, buffer_pkts=100)
    _, pie = run(out, "a2_pie", 15)
    rtt20 = metric(f20, "ping", "ping", "rtt_p50_ms")
    rtt100 = metric(f100, "ping", "ping", "rtt_p50_ms")
    print(f"FIFO-20 RTT p50 {rtt20:.0f} ms, FIFO-100 {rtt100:.0f} ms (theory: full queues "
          f"add 161 and 807 ms)")
    assert rtt100 > 2.5 * rtt20
    pie_delay = metric(pie, "link", "pie", "aqm_delay_p50_ms")
    fifo_delay = metric(f100, "link", "fifo", "qdelay_p50_ms")
    print(f"PIE delay p50 {pie_delay:.1f} ms (target 20), FIFO-100 {fifo_delay:.0f} ms")
    assert 10 <= pie_delay <= 40 and fifo_delay > 300


def test_a_ten_flows_raise_the_fetch_time(out):
    _, one = run(out, "a3_pie_flows", 20, flows=1)
    _, ten = run(out, "a3_pie_flows", 20, flows=10)
    t1 = metric(one, "web", "all", "total_mean_s")
    t10 = metric(ten, "web", "all", "total_mean_s")
    print(f"web fetch mean: 1 flow {t1:.2f} s, 10 flows {t10:.2f} s")
    assert t10 > 1.3 * t1
    assert metric(ten, "network", "all", "flows") == 10


def test_a_more_loss_lowers_the_throughput(out):
    # at 10 Mbit/s and 20 ms the Mathis bound at 4 % loss (~3.5 Mbit/s) is below the link
    _, low = run(out, "a4_wifi_loss", 15, variant="fifo", loss_pct=0.5, bottleneck_mbit=10)
    _, high = run(out, "a4_wifi_loss", 15, variant="fifo", loss_pct=4, bottleneck_mbit=10)
    g_low = metric(low, "flow", "long", "throughput_mbit")
    g_high = metric(high, "flow", "long", "throughput_mbit")
    print(f"throughput at 0.5 % loss {g_low:.2f} Mbit/s, at 4 % {g_high:.2f} Mbit/s")
    assert g_high < 0.7 * g_low


def test_a_udp_video_takes_throughput_from_tcp_while_it_runs(out):
    r, rows = run(out, "a5_video", 30, variant="fifo")
    it = r.series("iperf")
    mid = (it["t_start"] >= 11) & (it["t_end"] <= 19)
    outside = ((it["t_start"] >= 4) & (it["t_end"] <= 9)) | (it["t_start"] >= 22)
    during, before = np.mean(it["bits_per_second"][mid]), np.mean(
        it["bits_per_second"][outside])
    print(f"TCP {before / 1e6:.2f} Mbit/s without the stream, {during / 1e6:.2f} with it; "
          f"UDP loss {metric(rows, 'udp', 'video', 'loss_pct'):.1f} %, jitter "
          f"{metric(rows, 'udp', 'video', 'jitter_ms'):.1f} ms, one-way p50 "
          f"{metric(rows, 'udp', 'video', 'owd_p50_ms'):.0f} ms")
    assert during < 0.85 * before
    assert metric(rows, "udp", "video", "throughput_mbit") > 0.2   # the 0.5 Mbit/s stream


def test_b_average_latency_grows_with_the_pie_target(out):
    r5, low = run(out, "b2_pie_target", 15, **{"qdisc.target_ms": 5})
    _, high = run(out, "b2_pie_target", 15, **{"qdisc.target_ms": 20})
    assert r5.record["scaling"] is None or r5.record["scaling"]["factor"] <= 1
    m5 = metric(low, "ping", "rrul-ping", "rtt_mean_ms")
    m20 = metric(high, "ping", "rrul-ping", "rtt_mean_ms")
    print(f"RRUL ping mean: target 5 ms -> {m5:.1f} ms, target 20 ms -> {m20:.1f} ms")
    assert m20 > m5 + 5


@pytest.mark.parametrize("flows", [20, 40])
def test_c_red_and_pie_keep_the_queue_below_fifo(out, flows):
    common = dict(flows=flows)
    _, red = run(out, "c1_red_vs_pie", 20, variant="red", **common)
    _, pie = run(out, "c1_red_vs_pie", 20, variant="pie", **common)
    _, fifo = run(out, "c1_red_vs_pie", 20, qdisc="fifo", **common)
    q = {name: metric(rows, "link", "", "backlog_mean_bytes")
         for name, rows in (("red", red), ("pie", pie), ("fifo", fifo))}
    print(f"{flows} flows: mean backlog {q}")
    assert q["red"] < q["fifo"] and q["pie"] < q["fifo"]


def test_e_fq_codel_shares_equally(out):
    _, rows = run(out, "e1_aqm_kflows", 10, variant="fq_codel")
    jain = metric(rows, "network", "all", "jain_fairness")
    print(f"FQ-CoDel, 5 equal flows: Jain's index {jain:.3f}")
    assert jain >= 0.9


def test_d_vegas_keeps_the_queue_that_cubic_fills(out):
    _, cubic = run(out, "d1_cca_paths", 15, variant="lan", cca="cubic")
    _, vegas = run(out, "d1_cca_paths", 15, variant="lan", cca="vegas")
    qc = metric(cubic, "link", "", "backlog_mean_bytes")
    qv = metric(vegas, "link", "", "backlog_mean_bytes")
    print(f"mean backlog: cubic {qc:.0f} B, vegas {qv:.0f} B")
    assert qv < 0.5 * qc
    assert metric(vegas, "link", "", "utilization") > 0.8   # while still using the link
