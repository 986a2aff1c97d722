"""Study B by direction, on a recorded B run (tests/fixtures/runs/b2_rrul_irtt: the
RRUL-like load 4 + 4 flows at 10 Mbit/s each way, ICMP and irtt UDP probes, PIE both
ways): the totals figure shows download and upload apart (each flow and their sum, from
what the receivers acknowledged), the latency of each probe kind; the queueing-delay
figure one panel per direction's AQM at that direction's rate; the sweep table download
and upload goodput (sum and per-flow range), the UDP latency and both AQMs' delay.

The fixture's metrics.json was written before the reverse AQM had link metrics: the
tests that need them work on a copy without it (the metrics are then computed from the
stored series, as ``bufferbloat show --recompute`` does)."""
import os
import shutil

import numpy as np
import pytest

from bufferbloat import plots
from bufferbloat.plots import sweep, sweep_figures, sweep_tables
from bufferbloat.results.metrics import compute_metrics
from bufferbloat.results.metrics_queue import link_direction
from bufferbloat.results.records import load_run

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "fixtures", "runs", "b2_rrul_irtt")


def lines(ax, prefix):
    return [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)]


@pytest.fixture
def b_run(tmp_path):
    """A copy of the B run without its stored metrics (recomputed from the series)."""
    d = tmp_path / "b2_pie_target" / "run"
    shutil.copytree(FIX, d)
    os.remove(d / "metrics.json")
    os.remove(d / "metrics.csv")
    return load_run(str(d))


def metrics_of(run):
    return {(r["scope"], r["name"], r["metric"]): r["value"]
            for r in compute_metrics(run, run.record["warmup_s"])}


def test_totals_by_direction_each_flow_and_both_probe_kinds(b_run):
    fig = plots.FIGURES["totals"](b_run)
    ax_d, ax_u, ax_l = fig.axes
    for ax, way in ((ax_d, "down"), (ax_u, "up")):
        flows = lines(ax, "flow:")
        assert sorted(ln.get_gid() for ln in flows) == [f"flow:rrul-{way}-{i}"
                                                        for i in range(1, 5)]
        total = [ln for ln in ax.get_lines() if ln.get_gid() in ("total:download",
                                                                 "total:upload")][0]
        assert "bytes_acked" in total.get_label()
        # the sum line is the sum of the flow lines, bin by bin
        summed = np.sum([ln.get_ydata() for ln in flows], axis=0)
        assert np.allclose(total.get_ydata(), summed)
        # it carries what the receivers acknowledged (not what the senders wrote): the
        # 1 s bins hold the direction's bytes_acked between the first and last bin
        # edge (within 1 %), and no bin exceeds the link's rate (10 Mbit/s; 5 % for
        # where a bin edge falls between two 50 ms samples)
        edges = (total.get_xdata()[0] - 0.5, total.get_xdata()[-1] + 0.5)
        tcp = b_run.series("tcp")
        acked = 0.0
        for i in range(1, 5):
            mk = tcp["flow"] == f"rrul-{way}-{i}"
            acked += np.diff(np.interp(edges, tcp["t"][mk], tcp["bytes_acked"][mk]))[0]
        assert np.sum(total.get_ydata()) * 1e6 / 8 == pytest.approx(acked, rel=0.01)
        assert np.max(total.get_ydata()) <= 10 * 1.05
        assert lines(ax, "link-rate")[0].get_ydata()[0] == 10
    assert {ln.get_gid() for ln in lines(ax_l, "probe:")} == {"probe:rrul-ping",
                                                              "probe:irtt"}
    assert "UDP" in [ln for ln in lines(ax_l, "probe:irtt")][0].get_label()


def test_queue_of_each_direction(b_run):
    m = metrics_of(b_run)
    links = {k[1] for k in m if k[0] == "link"}
    assert links == {"s0-eth2:pie", "h2-eth0:pie"}
    assert link_direction(b_run.record, "s0-eth2:pie") == "up"
    assert link_direction(b_run.record, "h2-eth0:pie") == "down"
    # PIE both ways holds its queue near the 20 ms target in each direction
    for link in links:
        assert 5 < m[("link", link, "aqm_delay_p50_ms")] < 60
    fig = plots.FIGURES["qdelay"](b_run)
    assert len(fig.axes) == 2
    q = b_run.series("qdisc")
    for ax, dev in zip(fig.axes, ("s0-eth2", "h2-eth0")):
        (line,) = [ln for ln in lines(ax, "qdelay:") if dev in ln.get_gid()]
        assert "h1 -> h2" in line.get_label() if dev == "s0-eth2" else \
            "h2 -> h1" in line.get_label()
        leaf = (q["dev"] == dev) & (q["kind"] == "pie")
        assert np.allclose(line.get_ydata(), q["backlog_bytes"][leaf] * 8 / 10e6 * 1e3)
        assert lines(ax, "target")[0].get_ydata()[0] == 20


def test_sweep_table_and_keys_by_direction(b_run, monkeypatch):
    monkeypatch.setenv(sweep.INCLUDE_DEGRADED_ENV, "1")    # the fixture is degraded
    points = sweep.load_points(os.path.dirname(b_run.dir))
    (row,) = sweep_tables.table_rows(points)
    m = metrics_of(b_run)
    assert row["download_mean_mbit"] == pytest.approx(m[("network", "all",
                                                         "goodput_down_mbit")])
    assert row["upload_mean_mbit"] == pytest.approx(m[("network", "all", "goodput_up_mbit")])
    downs = [m[("flow", f"rrul-down-{i}", "throughput_mbit")] for i in range(1, 5)]
    assert row["download_flow_min_mbit"] == min(downs)
    assert row["download_flow_max_mbit"] == max(downs)
    assert row["udp_latency_mean_ms"] == pytest.approx(m[("irtt", "irtt", "rtt_mean_ms")])
    assert row["qdelay_p50_ms"] == pytest.approx(m[("link", "s0-eth2:pie", "qdelay_p50_ms")])
    assert row["qdelay_down_p50_ms"] == pytest.approx(
        m[("link", "h2-eth0:pie", "qdelay_p50_ms")])
    md = sweep_tables.table_markdown([row])
    assert "download Mbit/s" in md and "UDP latency" in md
    # the aggregate's reference is both directions' rate; each direction's its own
    p = points[0]
    p.varied = {"x": 1}
    for key, rate in (("throughput_mbit", 20), ("goodput_down_mbit", 10),
                      ("goodput_up_mbit", 10)):
        fig = sweep_figures.draw_metric([p], "x", key)
        assert lines(fig.axes[0], "link-rate")[0].get_ydata()[0] == rate, key
