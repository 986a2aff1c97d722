"""Figures drawn from stored fixture runs, checked for content: the plotted series, the
axis ranges, the reference lines (theory, target, link rate), labels with units, the
palette; sweeps (error bars, theory per point, tables); flags against theory.

Fixtures (tests/fixtures/runs/, see make_fixtures.py): real runs, trimmed.
a1_fifo (host, FIFO 100 pkts, 1 flow), a3_fifo_3flows (host, 3 flows), a2_pie (VM, PIE
target 20 ms), b2_rrul (VM, PIE under the RRUL-like load, 10 Mbit/s),
sweep_fifo_buffer (host, buffer_pkts=20,100 x 2 repetitions).
"""
import copy
import json
import os
import re
import shutil

import numpy as np
import pytest

from bufferbloat import plots
from bufferbloat.core.errors import UsageError
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.plots import commands, common, palette, sweep, sweep_figures, sweep_tables
from bufferbloat.plots.flags import flags
from bufferbloat.results import theory
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "fixtures", "runs")
RUNS = ("a1_fifo", "a3_fifo_3flows", "a2_pie", "b2_rrul")
UNIT = re.compile(r"\(([^)]+)\)")


def run(name):
    return load_run(os.path.join(FIX, name))


def lines(ax, prefix):
    return [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)]


def gid_line(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert found, f"no line with gid {gid!r}: {[ln.get_gid() for ln in ax.get_lines()]}"
    return found[0]


def covers(ax, xs, ys=None):
    """The axes' ranges contain every finite data value."""
    xs = np.asarray(xs, float)
    lo, hi = ax.get_xlim()
    assert lo <= np.nanmin(xs) and hi >= np.nanmax(xs), (lo, hi, np.nanmin(xs), np.nanmax(xs))
    if ys is not None:
        ys = np.asarray(ys, float)
        lo, hi = ax.get_ylim()
        assert lo <= np.nanmin(ys) and hi >= np.nanmax(ys), (lo, hi, np.nanmax(ys))


# ------------------------------------------------------------------ every figure

@pytest.mark.parametrize("name", RUNS)
def test_every_figure_has_title_units_legend_and_caption(name):
    r = run(name)
    figs = plots.draw_figures(r)
    assert {"cwnd", "rtt", "queue", "throughput", "ecdf"} <= set(figs)
    for fig_name, fig in figs.items():
        assert fig._suptitle is not None and fig._suptitle.get_text(), fig_name
        texts = " ".join(t.get_text() for t in fig.texts)
        assert "qdisc" in texts and "Mbit/s" in texts and "base RTT" in texts \
            and "buffer" in texts and "CCA" in texts, (fig_name, texts)
        for ax in fig.axes:
            assert UNIT.search(ax.get_ylabel()), (fig_name, ax.get_ylabel())
            if ax.get_xlabel():
                assert UNIT.search(ax.get_xlabel()) or fig_name in ("fairness", "box"), \
                    (fig_name, ax.get_xlabel())
        # at least one axes carries a legend naming what is drawn
        assert any(ax.get_legend() is not None for ax in fig.axes), fig_name
        # the bottom axes have an x label
        assert fig.axes[-1].get_xlabel(), fig_name


def test_scenario_figures_come_first_and_unknown_names_are_refused():
    r = run("b2_rrul")
    assert plots.scenario_figures(r) == ["totals", "ellipsis", "drops", "qdelay"]
    assert list(plots.draw_figures(r))[:4] == ["totals", "ellipsis", "drops", "qdelay"]
    assert list(plots.draw_figures(r, ["rtt", "cwnd"])) == ["cwnd", "rtt"]
    with pytest.raises(UsageError, match="unknown figure"):
        plots.draw_figures(r, ["nope"])


def test_figures_the_data_does_not_allow_are_left_out():
    figs = plots.draw_figures(run("a1_fifo"))
    assert "udp" not in figs and "totals" not in figs     # no udp.csv, no RRUL flows
    assert "web" in figs


# ------------------------------------------------------------------ per-run figures

def test_cwnd_one_line_per_flow_covering_the_data():
    r = run("a3_fifo_3flows")
    tcp = r.series("tcp")
    flows = sorted(set(tcp["flow"].tolist()))
    assert len(flows) == 3
    fig = plots.FIGURES["cwnd"](r)
    ax = fig.axes[0]
    drawn = lines(ax, "flow:")
    assert len(drawn) == len(flows) == len(ax.get_lines())
    assert sorted(ln.get_gid()[5:] for ln in drawn) == flows
    assert all("cubic" in ln.get_label() for ln in drawn)
    covers(ax, tcp["t"], tcp["cwnd_pkts"])
    assert ax.get_xlabel() == "time (s)" and ax.get_ylabel() == "cwnd (packets)"
    # each line holds exactly its flow's samples
    for ln in drawn:
        mask = tcp["flow"] == ln.get_gid()[5:]
        assert np.array_equal(ln.get_ydata(), tcp["cwnd_pkts"][mask])
    # flows keep their colours across figures (palette order)
    thr = plots.FIGURES["throughput"](r).axes[0]
    for i, ln in enumerate(drawn):
        assert ln.get_color() == palette.flow_color(i)
        assert gid_line(thr, ln.get_gid()).get_color() == ln.get_color()


def test_rtt_full_queue_theory_line_for_fifo():
    r = run("a1_fifo")
    ping = r.series("ping")
    fig = plots.FIGURES["rtt"](r)
    ax = fig.axes[0]
    expect = theory.full_queue_rtt_ms(r.record["base_rtt_ms"], 100, 1.5, probe_interval_s=0.1)
    assert gid_line(ax, "theory").get_ydata()[0] == pytest.approx(expect)
    assert 740 < expect < 760
    assert "full-queue" in gid_line(ax, "theory").get_label()
    assert not lines(ax, "target")                       # a FIFO has no target
    ok = np.isfinite(ping["rtt_ms"])
    covers(ax, ping["t"], ping["rtt_ms"][ok])
    assert ax.get_ylim()[1] >= expect                      # the bound stays in view
    assert ax.get_ylabel() == "RTT (ms)"
    lost = lines(ax, "lost:")
    assert sum(len(ln.get_xdata()) for ln in lost) == int((~ok).sum())


def test_qdelay_target_line_sits_at_the_configured_target():
    r = run("a2_pie")
    target = r.record["qdisc"]["params"]["target_ms"]
    assert target == 20
    fig = plots.FIGURES["qdelay"](r)
    ax = fig.axes[0]
    line = gid_line(ax, "target")
    assert list(line.get_ydata()) == [target, target]
    assert "20 ms" in line.get_label()
    q = r.series("qdisc")
    leaf = q["kind"] == "pie"
    measured = gid_line(ax, "qdelay:s0-eth2:pie")
    expect = q["backlog_bytes"][leaf] * 8 / 1.5e6 * 1e3
    assert np.allclose(measured.get_ydata(), expect)
    own = gid_line(ax, "aqm_delay:s0-eth2:pie")          # PIE's delay_us estimate
    assert np.allclose(own.get_ydata(), q["delay_us"][leaf] / 1e3, equal_nan=True)
    covers(ax, q["t"][leaf], expect)
    assert ax.get_ylabel() == "queueing delay (ms)"
    # the same target on the RTT plot, above the base RTT
    rtt = plots.FIGURES["rtt"](r).axes[0]
    assert gid_line(rtt, "target").get_ydata()[0] == pytest.approx(20 + 20)
    assert gid_line(rtt, "link-rate").get_ydata()[0] == pytest.approx(20)


def test_queue_plots_the_aqm_leaf_only_in_packets_and_bytes():
    r = run("a1_fifo")
    q = r.series("qdisc")
    leaf = (q["kind"] == "pfifo") & (q["dev"] == r.record["bottleneck_dev"])
    fig = plots.FIGURES["queue"](r)
    ax_p, ax_b = fig.axes
    (lp,) = ax_p.get_lines()[:1]
    assert lp.get_gid() == "leaf:s0-eth2:pfifo"
    assert len(lines(ax_p, "leaf:")) == 1                 # not the htb root
    assert np.array_equal(lp.get_ydata(), q["qlen_pkts"][leaf])
    assert np.array_equal(lines(ax_b, "leaf:")[0].get_ydata(), q["backlog_bytes"][leaf])
    assert gid_line(ax_p, "limit").get_ydata()[0] == 100
    assert lp.get_color() == palette.qdisc_color("fifo")
    covers(ax_p, q["t"][leaf], q["qlen_pkts"][leaf])
    assert ax_p.get_ylabel() == "queue (packets)" and ax_b.get_ylabel() == "backlog (bytes)"


def test_drops_are_per_interval_deltas_and_pie_probability_is_shown():
    r = run("a2_pie")
    q = r.series("qdisc")
    leaf = q["kind"] == "pie"
    fig = plots.FIGURES["drops"](r)
    ax, ax_prob = fig.axes
    drops = gid_line(ax, "drops:s0-eth2:pie")
    total = np.nansum(drops.get_ydata()) * 0.5                 # per s x 0.5 s bins
    d = q["drops"][leaf]
    assert total == pytest.approx(d[-1] - d[0])
    assert gid_line(ax_prob, "prob:s0-eth2:pie").get_ydata().max() == pytest.approx(
        np.nanmax(q["prob"][leaf]))
    assert ax.get_ylabel().startswith("packets/s")


def test_throughput_lines_aggregate_and_link_rate():
    r = run("a3_fifo_3flows")
    tcp = r.series("tcp")
    ax = plots.FIGURES["throughput"](r).axes[0]
    assert len(lines(ax, "flow:")) == 3
    agg = gid_line(ax, "aggregate")
    # the aggregate is what the receivers acknowledged over the bins (bytes conserved:
    # no more than the flows' bytes_acked from the first sample to the last)
    t0, t1 = np.nanmin(tcp["t"]), np.nanmax(tcp["t"])
    acked = sum(np.nanmax(tcp["bytes_acked"][m]) - np.nanmin(tcp["bytes_acked"][m])
                for m in (tcp["flow"] == f for f in set(tcp["flow"].tolist())))
    covered = len(agg.get_xdata()) * 1.0
    assert np.sum(agg.get_ydata()) * 1e6 / 8 <= acked * 1.001
    assert covered <= t1 - t0 + 1e-9
    assert gid_line(ax, "link-rate").get_ydata()[0] == 1.5
    assert gid_line(ax, "theory").get_ydata()[0] == pytest.approx(theory.tcp_goodput_ceiling(1.5))
    covers(ax, agg.get_xdata(), agg.get_ydata())
    assert ax.get_ylabel() == "goodput (Mbit/s)"


def test_fairness_bars_and_jain_index():
    r = run("a3_fifo_3flows")
    fig = plots.FIGURES["fairness"](r)
    ax = fig.axes[0]
    assert len(ax.patches) == 3
    assert "Jain's index" in fig._suptitle.get_text()
    jain = float(re.search(r"index ([0-9.]+)", fig._suptitle.get_text()).group(1))
    shares = [p.get_height() for p in ax.patches]
    assert jain == pytest.approx(sum(shares) ** 2 / (3 * sum(s * s for s in shares)), abs=1e-3)


def test_web_every_fetch_with_failures_marked():
    r = run("a1_fifo")
    web = r.series("web")
    ax = plots.FIGURES["web"](r).axes[0]
    ok = web["ok"] == 1
    early = web["t"] < plots.web.warmup_cut_s(r)          # the metrics' warm-up
    assert len(gid_line(ax, "fetch:web").get_xdata()) == int((ok & ~early).sum())
    assert len(gid_line(ax, "warmup").get_xdata()) == int(early.sum()) >= 1
    # the last fetch was still running when the run ended: cut, not failed
    assert len(gid_line(ax, "cut:web").get_xdata()) == int((~ok).sum()) >= 1
    assert not lines(ax, "failed:")
    assert ax.get_ylabel() == "fetch time (s)"


def test_rrul_totals_sum_directions_with_target_and_link_rate():
    r = run("b2_rrul")
    fig = plots.FIGURES["totals"](r)
    ax_d, ax_u, ax_l = fig.axes
    # the downloads' senders (h2) are not sampled: their senders' rate, said so
    assert "4 flows" in gid_line(ax_d, "sent:total:download").get_label()
    assert "sender" in gid_line(ax_d, "sent:total:download").get_label()
    assert "4 flows" in gid_line(ax_u, "total:upload").get_label()
    assert gid_line(ax_d, "link-rate").get_ydata()[0] == 10
    ping = r.series("ping")
    assert len(gid_line(ax_l, "probe:rrul-ping").get_xdata()) == int(
        np.isfinite(ping["rtt_ms"]).sum())
    # this older B record's way back is the default FIFO, which RRUL's downloads fill:
    # no target line rather than a wrong one; with PIE both ways (B's dumbbell variant) the
    # ping crosses two 20 ms targets plus the 20 ms base RTT
    assert not lines(ax_l, "target")
    r.record["params"] = dict(r.record["params"], aqm_both_ways=True)
    ax_l = plots.FIGURES["totals"](r).axes[2]
    assert gid_line(ax_l, "target").get_ydata()[0] == pytest.approx(20 + 20 + 20)


def test_ellipsis_mean_and_covariance():
    from bufferbloat.plots import ellipsis
    r = run("b2_rrul")
    thr, lat = ellipsis.samples(r)
    assert thr.size >= 5
    # under RRUL the throughput is the download flows' sum, not all flows' (both
    # directions: ~2x)
    flows = plots.throughput.all_flows(r)
    _, both = plots.throughput.aggregate_rate(r, flows=flows)
    assert thr.mean() < 0.7 * np.mean(both) and thr.mean() < 12
    ax = plots.FIGURES["ellipsis"](r).axes[0]
    (mean,) = lines(ax, "mean:")
    assert mean.get_xdata()[0] == pytest.approx(lat.mean())
    assert mean.get_ydata()[0] == pytest.approx(thr.mean())
    (patch,) = [p for p in ax.patches if (p.get_gid() or "").startswith("ellipse:")]
    e = ellipsis.ellipse(lat, thr)
    assert patch.width == pytest.approx(e[2]) and patch.height == pytest.approx(e[3])
    # a 1-sigma ellipse of an axis-aligned cloud: widths 2 std
    x = np.array([0.0, 2.0, 0.0, 2.0])
    y = np.array([0.0, 0.0, 4.0, 4.0])
    mx, my, w, h, _ = ellipsis.ellipse(x, y)
    assert (mx, my) == (1.0, 2.0)
    assert sorted([w, h]) == pytest.approx(sorted([2 * np.std(x, ddof=1),
                                                   2 * np.std(y, ddof=1)]))


def test_ecdf_ends_at_one_and_operating_points():
    r = run("a3_fifo_3flows")
    fig = plots.FIGURES["ecdf"](r)
    ax_r, ax_t = fig.axes
    for ln in ax_r.get_lines() + ax_t.get_lines():
        assert ln.get_ydata()[-1] == pytest.approx(1.0)
    assert len(lines(ax_t, "flow:")) == 3 and len(lines(ax_r, "srtt:")) == 3
    op = plots.FIGURES["operating"](r).axes[0]
    tcp = r.series("tcp")
    pts = [c for c in op.containers]
    assert len(pts) == 3
    cut = plots.web.warmup_cut_s(r)
    for flow, cca, rtt, _, mbit, _ in plots.operating.points(r):
        assert rtt == pytest.approx(np.nanmean(
            tcp["srtt_us"][(tcp["flow"] == flow) & (tcp["t"] >= cut)]) / 1e3)
    assert op.get_xlabel() == "mean srtt (ms)"
    # study E's optimal point (base RTT, rate / k) and joint point (mean srtt, the
    # aggregate goodput)
    pts = plots.operating.points(r)
    opt = gid_line(op, "optimal")
    assert opt.get_xdata()[0] == pytest.approx(r.base_rtt_ms)
    assert opt.get_ydata()[0] == pytest.approx(r.bottleneck_mbit / 3)
    joint = gid_line(op, "joint")
    assert joint.get_xdata()[0] == pytest.approx(np.mean([p[2] for p in pts]))
    assert joint.get_ydata()[0] == pytest.approx(plots.operating.joint_goodput(r))
    assert joint.get_ydata()[0] <= r.bottleneck_mbit


def test_udp_figure_from_a_synthetic_stream(tmp_path):
    """No fixture carries UDP (a5_video needs netem): a small synthetic run."""
    w = RunWriter(tmp_path / "udp")
    w.record.update(scenario={"name": "synthetic"}, params={"bottleneck_mbit": 1.5,
                                                            "qdisc": "fifo"})
    rows = []
    for seq in range(200):
        if seq % 10 == 3:
            continue                              # 10 % lost
        rows.append(("video", seq, seq * 0.01, seq * 0.01 + 0.02, 1000))
    w.add_rows("udp", SERIES_COLUMNS["udp"], rows)
    w.close("ok")
    r = load_run(tmp_path / "udp")
    fig = plots.FIGURES["udp"](r)
    ax_r, ax_d, ax_l = fig.axes
    rate = gid_line(ax_r, "stream:video").get_ydata()
    assert rate[0] == pytest.approx(90 * 1000 * 8 / 1e6)      # 90 packets in the 1st s
    owd = gid_line(ax_d, "owd:video").get_ydata()
    assert np.allclose(owd, 20.0)
    loss = ax_l.get_lines()[0].get_ydata()
    assert loss[0] == pytest.approx(10.0, abs=1.0)
    assert ax_l.get_ylabel() == "loss (%)"


# ------------------------------------------------------------------ draw_run / CLI

def _copy(name, tmp_path):
    dest = tmp_path / name
    shutil.copytree(os.path.join(FIX, name), dest)
    return str(dest)


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_draw_run_writes_figures_in_the_format(tmp_path, fmt):
    d = _copy("a1_fifo", tmp_path)
    paths = plots.draw_run(d, fmt=fmt)
    assert paths and all(p.startswith(os.path.join(d, "figures")) for p in paths)
    assert all(p.endswith("." + fmt) and os.path.getsize(p) > 1000 for p in paths)
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}[fmt]
    with open(paths[0], "rb") as f:
        assert f.read(5).startswith(magic)


def test_cli_plot_and_report_and_usage_errors(tmp_path, capsys):
    d = _copy("a2_pie", tmp_path)
    assert commands.cli_plot(d, "png") == 0
    out = capsys.readouterr().out.split()
    assert out and all(os.path.isfile(p) for p in out)
    with pytest.raises(UsageError):
        commands.cli_plot(str(tmp_path / "missing"), "png")
    with pytest.raises(UsageError, match="format"):
        commands.cli_plot(d, "jpg")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError):
        commands.cli_report(str(empty))
    with pytest.raises(UsageError):
        commands.cli_report(str(tmp_path / "missing"))
    assert commands.cli_report(d) == 0
    assert capsys.readouterr().out.strip() == os.path.join(d, "report.html")


# ------------------------------------------------------------------ palette

def test_palette_is_consistent():
    assert palette.qdisc_color("pfifo") == palette.qdisc_color("fifo")
    assert len({palette.qdisc_color(k) for k in ("fifo", "pie", "red", "codel",
                                                 "fq_codel")}) == 5
    assert palette.cca_color("cubic") != palette.cca_color("reno")
    pie = plots.FIGURES["queue"](run("a2_pie")).axes[0].get_lines()[0]
    assert pie.get_color() == palette.qdisc_color("pie")


# ------------------------------------------------------------------ sweeps

def test_sweep_points_error_bars_and_theory():
    pts = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    assert len(pts) == 4
    assert {p.key for p in pts} == {"buffer_pkts=20", "buffer_pkts=100"}
    assert sorted(p.rep for p in pts) == [1, 1, 2, 2]
    fig = sweep_figures.draw_metric(pts, "buffer_pkts", "rtt_mean_ms")
    ax = fig.axes[0]
    (container,) = ax.containers
    line = container.lines[0]
    assert list(line.get_xdata()) == [20.0, 100.0]
    for x, y in zip(line.get_xdata(), line.get_ydata()):
        reps = [p for p in pts if float(p.varied["buffer_pkts"]) == x]
        vals = [common.metric_value(p.rows, "rtt_mean_ms", "ping") for p in reps]
        assert len(vals) == 2 and y == pytest.approx(np.mean(vals))
    # the error bars are the 95 % interval of the mean (Student t, 1 degree of freedom:
    # 12.706 s / sqrt(2)), the one the sweep table's ci_low/ci_high give
    (bars,) = container.lines[2]
    for seg, x in zip(bars.get_segments(), line.get_xdata()):
        reps = [p for p in pts if float(p.varied["buffer_pkts"]) == x]
        vals = [common.metric_value(p.rows, "rtt_mean_ms", "ping") for p in reps]
        half = 12.706 * np.std(vals, ddof=1) / np.sqrt(2)
        assert (seg[1][1] - seg[0][1]) / 2 == pytest.approx(half, rel=1e-3)
    assert "95 % confidence interval" in fig.texts[0].get_text() or any(
        "95 % confidence interval" in t.get_text() for t in fig.texts)
    th = gid_line(ax, "theory")
    r0 = pts[0].run
    base = r0.record["base_rtt_ms"]
    assert list(th.get_ydata()) == pytest.approx(
        [theory.full_queue_rtt_ms(base, n, 1.5, probe_interval_s=0.1) for n in (20, 100)])
    assert ax.get_xlabel() == "buffer_pkts" and "(ms)" in ax.get_ylabel()
    covers(ax, [20, 100], line.get_ydata())


def test_sweep_throughput_link_rate_jain_ideal_and_box():
    pts = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    ax = sweep_figures.draw_metric(pts, "buffer_pkts", "throughput_mbit").axes[0]
    assert gid_line(ax, "link-rate").get_ydata()[0] == 1.5
    ax = sweep_figures.draw_metric(pts, "buffer_pkts", "jain_fairness").axes[0]
    assert gid_line(ax, "theory").get_ydata()[0] == 1.0
    fig = sweep_figures.draw_box(pts, "buffer_pkts")
    ax_r, ax_t = fig.axes
    assert len([p for p in ax_r.patches if (p.get_gid() or "").startswith("box:")]) == 2
    assert sweep_figures.draw_comparison(pts) is None           # one qdisc only
    assert {"box", "ellipsis", "rtt_mean_ms-vs-buffer_pkts"} <= set(sweep_figures.draw_all(pts))


def test_mathis_bound_on_a_loss_sweep():
    assert sweep_figures.mathis_mbit(1448, 100, 1) == pytest.approx(
        1448 * 8 / 0.1 * np.sqrt(1.5) / 0.1 / 1e6)
    # relabel the fixture's points as a loss sweep: the bound appears per point
    pts = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    for p in pts:
        p.varied = {"loss_pct": "1" if p.varied["buffer_pkts"] == "20" else "4"}
    ax = sweep_figures.draw_metric(pts, "loss_pct", "throughput_mbit").axes[0]
    th = gid_line(ax, "theory")
    assert "Mathis" in th.get_label()
    assert list(th.get_xdata()) == [1.0, 4.0]
    for x, y in zip(th.get_xdata(), th.get_ydata()):
        reps = [p for p in pts if float(p.varied["loss_pct"]) == x]
        srtt = np.mean([p.value("srtt_mean_ms") for p in reps])
        assert y == pytest.approx(min(sweep_figures.mathis_mbit(1448, srtt, x), 1.5))


def test_comparison_of_qdiscs_uses_the_palette():
    pts = [sweep.Point(run(n), {}, 1) for n in ("a1_fifo", "a2_pie")]
    sweep.fill_varied(pts)
    for p in pts:
        p.rows = common.run_metrics(p.run)
    fig = sweep_figures.draw_comparison(pts)
    bars = {p.get_gid(): p for ax in fig.axes for p in ax.patches}
    assert bars["bar:fifo"].get_facecolor()[:3] == pytest.approx(
        tuple(int(palette.qdisc_color("fifo")[i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert "bar:pie" in bars
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["fifo", "pie"]


def test_tables_csv_and_markdown(tmp_path):
    pts = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    rows = sweep_tables.table_rows(pts)
    assert [r["point"] for r in rows] == ["buffer_pkts=20", "buffer_pkts=100"]
    for r in rows:
        assert r["reps"] == 2
        assert r["latency_min_ms"] <= r["latency_mean_ms"] <= r["latency_max_ms"]
        assert r["throughput_min_mbit"] <= r["throughput_max_mbit"]
    assert rows[0]["latency_mean_ms"] < rows[1]["latency_mean_ms"]   # more buffer, more delay
    csv_path, md_path = sweep_tables.write_tables(pts, str(tmp_path))
    text = open(csv_path).read().splitlines()
    assert text[0].split(",") == list(sweep_tables.TABLE_COLUMNS) and len(text) == 3
    md = open(md_path).read().splitlines()
    assert md[0].startswith("| scenario | setting | point") and len(md) == 4
    assert "buffer_pkts=100" in md[3]


def test_index_paths_are_resolved_relative_to_the_index(tmp_path):
    """The fixture's index names /tmp/fx/... paths; a moved tree still loads."""
    src = os.path.join(FIX, "sweep_fifo_buffer")
    with open(os.path.join(src, "index.json")) as f:
        assert all(e["run_dir"].startswith("/tmp/") for e in json.load(f)["done"])
    dest = tmp_path / "moved"
    shutil.copytree(src, dest)
    pts = sweep.load_points(str(dest))
    assert all(p.run.dir.startswith(str(dest)) for p in pts) and len(pts) == 4


# ------------------------------------------------------------------ flags

def test_flags_on_fixtures():
    assert not any("full-queue" in f for f in flags(run("a1_fifo")))
    three = flags(run("a3_fifo_3flows"))
    assert any("Jain's index" in f and "3 equal flows" in f for f in three)


def test_the_full_queue_flag_spans_a_varying_links_rates():
    """A FIFO on a link whose rate varied: its largest RTT may reach the full buffer's
    drain at the trace's lowest rate (never flagged "another queue" for it), and is
    "not filled" only below the drain at the highest rate."""
    r = copy.deepcopy(run("a1_fifo"))
    rows = common.run_metrics(r)
    rtt_max = max(common.metric_values(rows, "rtt_max_ms", "ping").values())
    rate = r.bottleneck_mbit
    # a trace from a tenth of the rate to twice it: the bound at a tenth is ~10x higher
    r.record["link_trace"] = {"min_mbit": rate / 10, "max_mbit": rate * 2}
    assert not any("full-queue" in f for f in flags(r, rows))
    # the same RTT seen on a link whose lowest rate is four times the run's: far above
    r.record["link_trace"] = {"min_mbit": rate * 4, "max_mbit": rate * 8}
    (msg,) = [f for f in flags(r, rows) if "full-queue" in f]
    assert f"above the full-queue bound at {rate * 4:g} Mbit/s" in msg, (msg, rtt_max)
    assert common.full_queue_rtt_ms(r, rate * 4) < common.full_queue_rtt_ms(r)
    # a link that did not fill: flagged on a constant link, not on a varying one
    low = [dict(x, value=0.5) if x["metric"] == "utilization" else x for x in rows]
    r.record.pop("link_trace")
    assert any("did not fill the link" in f for f in flags(r, low))
    r.record["link_trace"] = {"min_mbit": rate / 4, "max_mbit": rate * 2}
    assert not any("did not fill the link" in f for f in flags(r, low))


def test_flags_contradictions_beyond_tolerance():
    r = run("a1_fifo")
    rows = common.run_metrics(r)
    # the same measurements against a 4x larger buffer: the RTT is far below its bound
    big = copy.deepcopy(r)
    big.record["qdisc"]["params"]["limit_pkts"] = 400
    (msg,) = [f for f in flags(big, rows) if "full-queue" in f]
    assert re.match(r"FIFO RTT \d+ % below the full-queue bound", msg) and "filled" in msg

    pie = run("a2_pie")
    fake = [dict(scope="link", name="s0-eth2:pie", metric="aqm_delay_p50_ms", value=60.0,
                 unit="ms"),
            dict(scope="link", name="s0-eth2:pie", metric="utilization", value=0.6, unit=""),
            dict(scope="network", name="all", metric="aggregate_throughput_mbit", value=0.9,
                 unit="Mbit/s")]
    out = flags(pie, fake)
    assert any(f.startswith("PIE queueing delay p50 3.0x its target") for f in out)
    assert any(f.startswith("utilization 60 %: the flow did not fill the link") for f in out)
    # within tolerance: nothing
    ok = [dict(fake[0], value=30.0), dict(fake[1], value=0.95), fake[2]]
    assert flags(pie, ok) == []

    # four flows a way at 10 Mbit/s over 1 ms: the floor (8.7 ms) is named; the way
    # back's fq_codel is judged against its own target, named as fq_codel
    rrul = copy.deepcopy(pie)
    rrul.record["base_rtt_ms"] = 1.0
    rrul.record["params"]["bottleneck_mbit"] = 10.0
    rrul.record["qdisc"]["params"]["target_ms"] = 5.0
    rrul.record["params"]["reverse_qdisc"] = "fq_codel"
    rrul.record["traffic"] = [{"kind": "rrul", "name": "rrul", "a": "h1", "b": "h2",
                               "start": 0.0, "stop": 1.0}]
    many = [dict(scope="link", name="s0-eth2:pie", metric="aqm_delay_p50_ms", value=12.0,
                 unit="ms"),
            dict(scope="link", name="h2-eth0:fq_codel", metric="aqm_delay_p50_ms",
                 value=17.0, unit="ms")] + [
        dict(scope="flow", name=f"rrul-{d}-{i}", metric="throughput_mbit", value=2.0,
             unit="Mbit/s") for d in ("up", "down") for i in (1, 2, 3, 4)]
    out = [f for f in flags(rrul, many) if "queueing delay" in f]
    assert len(out) == 2 and out[0].startswith("PIE") and out[1].startswith("FQ_CODEL")
    assert all("4 flows at their smallest window hold 8.7 ms" in f for f in out)

    three = run("a3_fifo_3flows")
    jain = [dict(scope="network", name="all", metric="jain_fairness", value=0.5, unit=""),
            dict(scope="network", name="all", metric="flows", value=3, unit="")]
    assert any("Jain's index 0.50 with 3 equal flows" in f for f in flags(three, jain))
    over = [dict(scope="flow", name="long", metric="throughput_mbit", value=2.0,
                 unit="Mbit/s")]
    assert any("above the link rate" in f for f in flags(r, over))


def test_plot_of_a_sweep_directory_draws_across_runs(tmp_path, capsys):
    d = _copy("sweep_fifo_buffer", tmp_path)
    assert commands.cli_plot(d, "svg") == 0
    out = capsys.readouterr().out.split()
    names = {os.path.basename(p) for p in out}
    assert {"a1_fifo-rtt_mean_ms-vs-buffer_pkts.svg", "a1_fifo-box.svg",
            "a1_fifo-table.csv", "a1_fifo-table.md"} <= names
    across = [p for p in out if os.path.basename(p).startswith("a1_fifo-")]
    assert all(os.path.dirname(p) == os.path.join(d, "figures") for p in across)
    # and each run's own figures (its scenario's) in its directory
    per_run = sorted(set(out) - set(across))
    runs = {os.path.dirname(os.path.dirname(p)) for p in per_run}
    assert len(runs) == 4 and all(os.path.basename(os.path.dirname(p)) == "figures"
                                  for p in per_run)
    assert {os.path.basename(p) for p in per_run} == {"cwnd.svg", "rtt.svg", "queue.svg",
                                                      "web.svg"}


def test_plot_of_a_directory_holding_runs_writes_per_run_only(tmp_path, capsys):
    """A directory that merely holds runs below it gets no figures/ of its own: each run
    gets its figures; a directory without runs is refused (exit 2)."""
    holder = tmp_path / "holder"
    holder.mkdir()
    for name in ("a1_fifo", "a2_pie"):
        shutil.copytree(os.path.join(FIX, name), holder / "deeper" / name)
    assert commands.cli_plot(str(holder)) == 0
    out = capsys.readouterr().out.split()
    assert not (holder / "figures").exists() and not (holder / "deeper" / "figures").exists()
    assert {os.path.relpath(os.path.dirname(p), holder) for p in out} == {
        os.path.join("deeper", "a1_fifo", "figures"), os.path.join("deeper", "a2_pie",
                                                                   "figures")}
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    from bufferbloat.cli import main
    assert main(["plot", str(empty)]) == 2
    assert not (empty / "figures").exists()


def test_plot_of_a_results_tree_puts_each_set_with_its_runs(tmp_path, capsys):
    """run-all's tree (an index without ``vary``): a scenario's across-run figures go
    to the directory that holds its runs."""
    tree = tmp_path / "results"
    shutil.copytree(os.path.join(FIX, "sweep_fifo_buffer"), tree / "a1_fifo" / "sweep")
    index = json.loads((tree / "a1_fifo" / "sweep" / "index.json").read_text())
    index.pop("vary")
    (tree / "index.json").write_text(json.dumps(index))
    (tree / "a1_fifo" / "sweep" / "index.json").unlink()
    assert commands.cli_plot(str(tree)) == 0
    assert not (tree / "figures").exists()
    assert (tree / "a1_fifo" / "sweep" / "figures" / "a1_fifo-box.png").is_file()


# ------------------------------------------------------------------ FIFO/PIE/CoDel/FQ-CoDel

def test_qdisc_sweep_comparison_targets_and_table():
    """sweep_qdiscs: a1_fifo in the VM with qdisc=fifo,pie,codel,fq_codel."""
    pts = sweep.load_points(os.path.join(FIX, "sweep_qdiscs"))
    kinds = [p.run.qdisc[0] for p in pts]
    assert kinds == ["fifo", "pie", "codel", "fq_codel"]
    fig = sweep_figures.draw_comparison(pts)
    assert len(fig.axes) == len(sweep_figures.COMPARE_KEYS)
    for ax, key in zip(fig.axes, sweep_figures.COMPARE_KEYS):
        bars = [p for p in ax.patches if (p.get_gid() or "").startswith("bar:")]
        assert [b.get_gid()[4:] for b in bars] == kinds
        for bar, p in zip(bars, pts):
            assert bar.get_height() == pytest.approx(p.value(key))
            assert bar.get_facecolor()[:3] == pytest.approx(tuple(
                int(palette.qdisc_color(p.run.record["qdisc"]["kind"])[i:i + 2], 16) / 255
                for i in (1, 3, 5)))
        assert UNIT.search(ax.get_ylabel())
    # the AQM targets per point as configured (PIE's default 15 ms; CoDel, FQ-CoDel
    # 5 ms), on a categorical x axis
    ax = sweep_figures.draw_metric(pts, "qdisc", "aqm_delay_p50_ms").axes[0]
    target = gid_line(ax, "target")
    configured = {float(i): p.run.record["qdisc"]["params"]["target_ms"]
                  for i, p in enumerate(pts) if i > 0}
    assert configured == {1.0: 15.0, 2.0: 5.0, 3.0: 5.0}
    assert dict(zip(target.get_xdata(), target.get_ydata())) == configured
    assert [t.get_text() for t in ax.get_xticklabels()] == kinds
    # the FIFO's full-queue RTT at the fifo point only
    ax = sweep_figures.draw_metric(pts, "qdisc", "rtt_mean_ms").axes[0]
    assert list(gid_line(ax, "theory").get_xdata()) == [0.0]
    rows = sweep_tables.table_rows(pts)
    assert [r["qdisc"] for r in rows] == kinds
    # bufferbloat: the FIFO's latency is the largest
    assert max(rows, key=lambda r: r["latency_mean_ms"])["qdisc"] == "fifo"


def test_flag_explains_a_target_below_one_frame_time():
    codel = sweep.load_points(os.path.join(FIX, "sweep_qdiscs"))[2].run
    rows = [dict(scope="link", name="s0-eth2:codel", metric="aqm_delay_p50_ms", value=19.0,
                 unit="ms")]
    (msg,) = flags(codel, rows)
    assert msg.startswith("CODEL queueing delay p50 3.8x its target")
    assert "one full frame takes 8.1 ms at 1.5 Mbit/s" in msg


# ------------------------------------------------------------------ odd runs

def test_failed_runs_draw_what_they_have(tmp_path):
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "result.json").write_text(json.dumps({"schema_version": 2,
                                                    "status": "failed", "error": "boom"}))
    assert plots.draw_figures(str(failed)) == {}
    assert commands.cli_plot(str(failed)) == 1
    assert flags(str(failed)) == ["run status 'failed': boom"]


def test_red_queue_in_bytes_and_all_five_qdiscs_side_by_side():
    red = run("c1_red_2flows")
    assert red.record["qdisc"]["kind"] == "red"
    ax_p, ax_b = plots.FIGURES["queue"](red).axes
    assert gid_line(ax_b, "limit").get_ydata()[0] == 50_000      # a byte-limited buffer
    assert lines(ax_b, "leaf:")[0].get_color() == palette.qdisc_color("red")
    q = red.series("qdisc")
    covers(ax_b, q["t"][q["kind"] == "red"], q["backlog_bytes"][q["kind"] == "red"])
    pts = sweep.load_points(os.path.join(FIX, "sweep_qdiscs"))
    extra = sweep.Point(red, {}, 1, rows=common.run_metrics(red))
    fig = sweep_figures.draw_comparison(pts + [extra])
    order = [b.get_gid()[4:] for b in fig.axes[0].patches]
    assert order == ["fifo", "pie", "red", "codel", "fq_codel"]
    assert len({b.get_facecolor() for b in fig.axes[0].patches}) == 5
