"""Figures agree with the metrics, on every run fixture.

- every throughput-like line of every figure (per-run figures, compare's overlay, the
  studies' and sweeps' figures) stays at or below the rate of the link it crosses, read
  from the figures' own data (Line2D y data, bar heights), not their picture; a line of a
  sender's rate (gid ``sent:...``) may go above only when its label says so;
- the fairness figure's bars are the metrics' per-flow goodput;
- the web fetch figure and the metrics (the headline's web:all:*) count the same fetches,
  with the same mean, after the same warm-up; a fetch cut by the run's end is cut, not
  failed;
- stored metrics of older code are recomputed (and the false "shaper" flag is gone).
"""
import glob
import json
import math
import os
import shutil

import numpy as np
import pytest

from bufferbloat import plots
from bufferbloat.plots import overlay, study, sweep
from bufferbloat.plots import web as webplot
from bufferbloat.plots.flags import flags
from bufferbloat.plots.throughput import link_rate_of
from bufferbloat.results import headline, metrics_latency
from bufferbloat.results import metrics as mx
from bufferbloat.results.records import load_run

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "fixtures", "runs")
RUN_DIRS = sorted(os.path.relpath(os.path.dirname(p), FIX)
                  for p in glob.glob(os.path.join(FIX, "**", "result.json"), recursive=True))
SETS = sorted(d for d in os.listdir(FIX) if os.path.isfile(os.path.join(FIX, d, "index.json")))
#: a 1 s bin of acknowledged bytes may exceed the shaped rate by HTB's burst at most
TOL = 0.03
#: per-run figures that draw throughput (y data in Mbit/s)
THROUGHPUT_FIGURES = ("throughput", "fairness", "ecdf", "operating", "flows", "totals",
                      "ellipsis")


def load(rel):
    return load_run(os.path.join(FIX, rel))


def _rate_for(run, gid, ax_ylabel):
    """The link rate a throughput line (by its gid) must stay under, or None."""
    kind, _, name = gid.partition(":")
    if kind == "sent":
        kind, _, name = name.partition(":")
    if kind == "total":
        return ((run.params.get("reverse_mbit") or run.bottleneck_mbit) if name == "download"
                else run.bottleneck_mbit)
    if kind == "flow":
        return link_rate_of(run, name)
    if kind in ("aggregate", "throughput", "tcp", "joint") or gid == "aggregate":
        return run.bottleneck_mbit
    return None


def throughput_values(fig):
    """[(gid, label, values Mbit/s)] of every throughput-like artist of ``fig``: lines on
    axes whose y label or x label says Mbit/s, by their y (or x, for eCDF panels) data;
    bars by their heights."""
    out = []
    for ax in fig.axes:
        ylab, xlab = ax.get_ylabel(), ax.get_xlabel()
        for ln in ax.get_lines():
            gid = ln.get_gid() or ""
            if not gid or gid in ("link-rate", "theory", "target", "optimal") \
                    or ln.get_marker() in ("_", "|"):    # error bars' caps: mean ± std
                continue
            if "Mbit/s" in ylab:
                out.append((gid, ln.get_label(), np.asarray(ln.get_ydata(), float)))
            elif "Mbit/s" in xlab:
                out.append((gid, ln.get_label(), np.asarray(ln.get_xdata(), float)))
        for patch in ax.patches:
            if "Mbit/s" in ylab and patch.get_gid() == "shares":
                out.append(("aggregate", "bar", np.array([patch.get_height()])))
        for c in ax.containers:
            if "Mbit/s" in ylab and getattr(c, "get_gid", lambda: None)() == "shares":
                out.append(("aggregate", "bar", np.array([b.get_height() for b in c])))
    return out


def assert_under_link(run, fig, what):
    checked = 0
    for gid, label, values in throughput_values(fig):
        rate = _rate_for(run, gid, "")
        values = values[np.isfinite(values)]
        if rate is None or not values.size:
            continue
        checked += 1
        top = float(values.max())
        if gid.startswith("sent:"):
            assert top <= rate * (1 + TOL) or "above the link rate" in label, \
                (what, gid, label, top, rate)
        else:
            assert top <= rate * (1 + TOL), (what, gid, f"{top:.3f} > {rate:g} Mbit/s")
    return checked


@pytest.mark.parametrize("rel", RUN_DIRS)
def test_per_run_throughput_figures_stay_under_the_link(rel):
    run = load(rel)
    figs = plots.draw_figures(run, [n for n in THROUGHPUT_FIGURES if n in plots.FIGURES])
    assert "throughput" in figs, rel
    checked = sum(assert_under_link(run, fig, f"{rel}:{name}") for name, fig in figs.items())
    assert checked >= 3, (rel, checked)


@pytest.mark.parametrize("name", SETS)
def test_across_run_throughput_figures_stay_under_the_link(name):
    points = sweep.load_points(os.path.join(FIX, name))
    pairs = [(f"p{i}", p.run) for i, p in enumerate(points)]
    fig = overlay.throughput(pairs)
    assert fig is not None
    by_gid = {f"throughput:p{i}": p.run for i, p in enumerate(points)}
    by_gid.update({f"sent:p{i}": p.run for i, p in enumerate(points)})
    for gid, label, values in throughput_values(fig):
        rate = by_gid[gid].bottleneck_mbit
        assert np.nanmax(values) <= rate * (1 + TOL) or (
            gid.startswith("sent:") and "above the link rate" in label), (name, gid)
    for p in points:                      # the sweep's box plot samples, the UDP study's
        _, thr = sweep.samples(p.run)
        assert thr.size and thr.max() <= p.run.bottleneck_mbit * (1 + TOL), (name, p.run.dir)
    fig = study.udp_effect(points)
    if fig is not None:
        for gid, label, values in throughput_values(fig):
            run = dict(study.representatives(points))[gid.split(":", 1)[1]]
            assert np.nanmax(values) <= run.bottleneck_mbit * (1 + TOL), (name, gid)


def test_sender_rates_are_labelled_and_flagged():
    """b2_rrul's downloads are not in tcp.csv: their line is the senders' rate, said so
    (and flagged where above the link); the uploads are goodput."""
    run = load("b2_rrul")
    fig = plots.FIGURES["totals"](run)
    gids = {ln.get_gid(): ln.get_label() for ax in fig.axes for ln in ax.get_lines()}
    assert "sent:total:download" in gids and "sender" in gids["sent:total:download"]
    assert "total:upload" in gids and "goodput" in gids["total:upload"]


def test_a2_pie_throughput_was_above_the_link_with_iperf_rates():
    """The failure the issue reports: iperf's sender rates of a2_pie peak above 1.5
    Mbit/s; the figure now draws acknowledged bytes, and its flow line is goodput."""
    run = load("a2_pie")
    ip = run.series("iperf")
    assert np.nanmax(ip["bits_per_second"]) / 1e6 > run.bottleneck_mbit   # the old data
    fig = plots.FIGURES["throughput"](run)
    flow = [ln for ln in fig.axes[0].get_lines() if ln.get_gid().startswith("flow:")]
    assert flow and np.nanmax(flow[0].get_ydata()) <= run.bottleneck_mbit * (1 + TOL)


@pytest.mark.parametrize("rel", [r for r in RUN_DIRS if not r.startswith("sweep_d1")])
def test_fairness_bars_are_the_metrics(rel):
    run = load(rel)
    fig = plots.FIGURES["fairness"](run)
    want = mx.metric_values(mx.run_rows(run), "throughput_mbit", "flow")
    if fig is None:
        assert not want
        return
    bars = [p.get_height() for p in fig.axes[0].patches]
    assert bars == pytest.approx(list(want.values()))


# ------------------------------------------------------------------ web fetches

WEB_RUNS = [r for r in RUN_DIRS if os.path.isfile(os.path.join(FIX, r, "series", "web.csv"))]


@pytest.mark.parametrize("rel", WEB_RUNS)
def test_fetch_figure_and_metrics_count_the_same(rel):
    run = load(rel)
    rows = mx.run_rows(run)
    fetches = mx.metric_value(rows, "fetches", "web")
    fig = plots.FIGURES["web"](run)
    ax = fig.axes[0]
    counted = sum(len(ln.get_xdata()) for ln in ax.get_lines()
                  if (ln.get_gid() or "").split(":")[0] in ("fetch", "failed", "cut"))
    assert counted == fetches
    ok_times = np.concatenate([np.asarray(ln.get_ydata(), float) for ln in ax.get_lines()
                               if (ln.get_gid() or "").startswith("fetch:")] + [[]])
    title = fig._suptitle.get_text()
    assert f"{ok_times.size} ok" in title
    mean = mx.metric_value(rows, "total_mean_s", "web")
    if ok_times.size:
        assert float(np.mean(ok_times)) == pytest.approx(mean)
        assert headline.fmt(mean) in title
    else:
        assert mean is None
    warm = sum(len(ln.get_xdata()) for ln in ax.get_lines() if ln.get_gid() == "warmup")
    assert warm + counted == len(run.series("web")["t"])


def test_a1_fifo_fetch_figure_drops_the_warmup_and_shows_the_cut_fetch():
    """a1_fifo (5 s warm-up, 8 s): three fetches in the warm-up, the fourth cut by the
    run's end: no failure, one cut, no mean (as its headline)."""
    run = load("a1_fifo")
    rows = mx.run_rows(run)
    assert mx.metric_value(rows, "failures", "web") == 0
    assert mx.metric_value(rows, "cut", "web") == 1
    title = plots.FIGURES["web"](run)._suptitle.get_text()
    assert "0 ok" in title and "0 failed, 1 cut by the run's end" in title, title
    assert "3 in the warm-up" in title
    items = {i["label"]: i for i in headline.values(run, rows)} \
        if hasattr(headline, "values") else {}
    for item in items.values():
        if "fetch" in item["label"]:
            assert item.get("value") is None


def test_cut_fetch_from_the_cut_column(tmp_path):
    """A run recorded with web.csv's ``cut`` column: a cut fetch is counted as cut, a
    failed one as failed, whatever the record's summary."""
    dst = tmp_path / "run"
    shutil.copytree(os.path.join(FIX, "a1_fifo"), dst)
    (dst / "series" / "web.csv").write_text(
        "fetch,t,total_s,connect_s,ttfb_s,size_bytes,http_code,ok,cut\n"
        "web,5.5,1.0,0.1,0.2,100000,200,1,0\n"
        "web,6.0,0.5,,,,,0,0\n"
        "web,7.0,1.0,,,,,0,1\n")
    rows = metrics_latency.web_metrics(load_run(str(dst)), -math.inf)
    got = {r["metric"]: r["value"] for r in rows}
    assert (got["fetches"], got["failures"], got["cut"]) == (3, 1, 1)
    assert got["total_mean_s"] == 1.0


def test_fetch_study_figure_uses_the_warmup():
    points = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    data = dict(study.fetch_times(points))
    for key, reps in study._reps_by_key(points).items():
        want = []
        for p in reps:
            if p.averaged:
                f = metrics_latency.web_fetches(p.run, webplot.warmup_cut_s(p.run))
                want += list(f["total_s"][f["ok"]])
        label = study._label(key)
        assert sorted(data[label]) == pytest.approx(sorted(want))
        every = sum(int(metrics_latency.web_fetches(p.run)["ok"].sum()) for p in reps if p.averaged)
        assert data[label].size < every          # the warm-up's fetches are left out


# ------------------------------------------------------------------ stale metrics

def test_stored_metrics_of_older_code_are_recomputed(tmp_path):
    """sweep_fifo_buffer's buffer_pkts=100 rep-1 stored, by older code, an aggregate of
    iperf's sender rates above the link: its report no longer flags the shaper."""
    src = os.path.join(FIX, "sweep_fifo_buffer", "buffer_pkts=100", "rep-1")
    with open(os.path.join(src, "metrics.json")) as f:
        stored = json.load(f)
    assert "metrics_version" not in stored
    old = mx.metric_value(stored["metrics"], "aggregate_throughput_mbit")
    run = load_run(src)
    assert old > run.bottleneck_mbit                         # the stale number
    assert mx.metrics_stale(run)
    rows = mx.run_rows(run)
    assert run.metrics_recomputed
    assert mx.metric_value(rows, "aggregate_throughput_mbit") <= run.bottleneck_mbit
    assert not [f for f in flags(run) if "shaper" in f]
    dst = tmp_path / "rep"
    shutil.copytree(src, dst)
    from bufferbloat.plots.report import write_report
    html = open(write_report(str(dst))).read()
    assert "shaper in place" not in html
    assert "recomputed" in html


def test_metrics_written_now_carry_the_version(tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(os.path.join(FIX, "a2_pie"), dst)
    run = load_run(str(dst))
    rows = mx.compute_metrics(run, warmup_s=run.warmup_s)
    mx.write_metrics(run, rows, warmup_s=run.warmup_s)
    with open(dst / "metrics.json") as f:
        assert json.load(f)["metrics_version"] == mx.METRICS_VERSION
    again = load_run(str(dst))
    assert not mx.metrics_stale(again)
    assert mx.run_rows(again) == json.loads((dst / "metrics.json").read_text())["metrics"]
    assert not again.metrics_recomputed
