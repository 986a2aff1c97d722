"""The studies' figures (plots/study.py) draw the runs' data, and read it out."""
import os

import matplotlib
import numpy as np
import pytest

from bufferbloat.plots import study, sweep
from bufferbloat.results import headline
from bufferbloat.results.metrics import traffic_start_s

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                   "runs")


def lines(fig, prefix):
    return {line.get_gid()[len(prefix):]: line for ax in fig.axes for line in ax.lines
            if (line.get_gid() or "").startswith(prefix)}


@pytest.fixture(scope="module")
def fifo_buffer():
    return sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))


@pytest.fixture(scope="module")
def video():
    return sweep.load_points(os.path.join(FIX, "sweep_a5_video"))


def test_timeseries_overlays_one_run_per_point_in_order(fifo_buffer):
    fig = study.timeseries(fifo_buffer)
    qlen = lines(fig, "qlen:")
    assert list(qlen) == ["buffer_pkts=20", "buffer_pkts=100"]     # by value, not by name
    run = study.representatives(fifo_buffer)[0][1]
    q = run.series("qdisc")
    leaf = q["kind"] == "pfifo"
    np.testing.assert_allclose(qlen["buffer_pkts=20"].get_xdata(),
                               q["t"][leaf] - traffic_start_s(run))
    # the small buffer's queue never passes its 20 packets; the large one's does
    assert np.nanmax(qlen["buffer_pkts=20"].get_ydata()) <= 20
    assert np.nanmax(qlen["buffer_pkts=100"].get_ydata()) > 20


def test_fetch_bars_are_the_mean_fetch_time(fifo_buffer):
    fig = study.fetch(fifo_buffer)
    bars = {p.get_gid()[len("fetch:"):]: p.get_height() for p in fig.axes[0].patches}
    for label, times in study.fetch_times(fifo_buffer):
        assert bars[label] == pytest.approx(times.mean() if times.size else 0.0)
    assert "web fetch time after the warm-up: buffer_pkts=20" in study.fetch_reading(fifo_buffer)


def test_the_video_stream_waits_behind_the_fifo_not_under_pie(video):
    fig = study.udp_effect(video)
    owd = {k: np.nanmedian(v.get_ydata()) for k, v in lines(fig, "owd:").items()}
    assert set(owd) == {"fifo", "pie", "pie10"}
    assert owd["fifo"] > 5 * max(owd["pie"], owd["pie10"])
    # the stream's on period is shaded, on each of the three panels, over its own span
    span = study._stream_span(study.representatives(video)[0][1])
    assert span and span[1] > span[0]
    for ax in fig.axes[:3]:
        shaded = [p for p in ax.patches
                  if matplotlib.colors.to_hex(p.get_facecolor()[:3]) == "#dddddd"]
        assert len(shaded) == 1, ax.patches
        p = shaded[0]
        xs = ([p.get_x(), p.get_x() + p.get_width()] if hasattr(p, "get_width")
              else np.asarray(p.get_xy())[:, 0])
        assert (min(xs), max(xs)) == pytest.approx(span)
    assert [p.get_label() for p in fig.axes[0].patches] == ["UDP stream on"]


def test_readings_leave_degraded_runs_out_and_say_so(video):
    # fifo and pie are degraded: only pie10 is read
    text = study.reading(video, study.PLOTS["udp-effect"][1])
    assert "pie10" in text and "fifo " not in text
    degraded = [p for p in video if p.degraded]
    assert study.reading(degraded, ["udp:owd_mean_ms"]).startswith("every run degraded")


def test_metrics_vs_draws_means_and_the_reference():
    pts = sweep.load_points(os.path.join(FIX, "sweep_qdiscs"))
    fig = study.metrics_vs(pts, "qdisc", [("ping:rtt_mean_ms", "RTT (ms)",
                                           lambda run: 40.0, "ref")], "t")
    line = [ln for ln in fig.axes[0].lines if (ln.get_gid() or "").startswith("metric:")][0]
    means = [headline.select(p.rows, "ping:rtt_mean_ms") for p in pts]
    np.testing.assert_allclose(sorted(line.get_ydata()), sorted(means))
    ref = [ln for ln in fig.axes[0].lines if ln.get_gid() == "theory"][0]
    assert set(ref.get_ydata()) == {40.0}
