"""The studies' figures (plots/study.py) draw the runs' data, and read it out."""
import os

import matplotlib
import numpy as np
import pytest

from bufferbloat.plots import study, sweep, sweep_figures
from bufferbloat.results import headline
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.run import identity

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


def _d_point(path, cca, variant, load, goodput, srtt_ms, bulk_goodput=None, rep=1):
    """A hand-made D run: its overrides as run-all records them (a stream's derived
    ``bulk_goodput_mbit`` among them, in its knobs and its stream's rate, so in its
    configuration's key), its two metric rows."""
    from bufferbloat.plots.sweep import Point
    from bufferbloat.results.records import load_run
    from bufferbloat.results.records_writer import RunWriter
    w = RunWriter(path)
    rates = {"fiber": 15, "dsl": 3, "cellular": 5}
    params = {"bottleneck_mbit": rates[variant], "cca": cca}
    config = {"scenario": "d1_cca_paths", "params": params, "profile": "full",
              "duration_s": 60, "knobs": {"load": load, "bulk_goodput_mbit": bulk_goodput},
              "traffic": [{"kind": "netperfmeter", "rate_mbit": bulk_goodput, "start": 0},
                          {"kind": "ping", "interval_s": 0.1}], "rep": rep}
    w.record.update(scenario={"name": "d1_cca_paths", "family": "D"}, params=params,
                    knobs={"load": load}, health={"verdict": "healthy"},
                    base_rtt_ms=40.0, **identity.record_fields(config))
    w.close("ok")
    overrides = {"cca": cca, "variant": variant, "load": load,
                 "bulk_goodput_mbit": bulk_goodput}
    rows = [{"scope": "network", "name": "all", "metric": "aggregate_throughput_mbit",
             "value": goodput, "unit": "Mbit/s"},
            {"scope": "flow", "name": "f", "metric": "srtt_mean_ms", "value": srtt_ms,
             "unit": "ms"}]
    return Point(load_run(path), overrides, rep, {}, rows)


@pytest.fixture(scope="module")
def d_points(tmp_path_factory):
    """Two CCAs x three paths x three loads, each value told apart by its inputs."""
    root = tmp_path_factory.mktemp("d")
    pts = []
    for ci, cca in enumerate(("reno", "bbr")):
        for vi, variant in enumerate(("fiber", "dsl", "cellular")):
            for li, load in enumerate(("bulk", "stream50", "stream25")):
                goodput = 10.0 * vi + li + 0.1 * ci
                bulk = None if load == "bulk" else 7.0 + ci + vi   # differs per point
                pts.append(_d_point(root / f"{cca}-{variant}-{load}", cca, variant, load,
                                    goodput, 100.0 * vi + 10 * li + ci, bulk))
    sweep.fill_varied(pts)
    return pts


def test_a_derived_knob_is_not_a_swept_key(d_points):
    # bulk_goodput_mbit differs among the points, but follows from cca, path and load
    assert sweep.swept_params(d_points) == ["cca", "load", "variant"]
    assert len(sweep.by_key(d_points)) == 18


def _stream_reps(root, values_reps):
    pts = [_d_point(root / f"r{i}", "reno", "fiber", "stream50", 7.0 + i, 50.0, value, rep)
           for i, (value, rep) in enumerate(values_reps)]
    sweep.fill_varied(pts)
    return pts


def test_repetitions_paced_from_their_own_bulk_run_are_one_point(tmp_path):
    # each repetition of a stream takes its own bulk repetition's goodput: their
    # configuration keys differ there only, and they stay repetitions of one point
    pts = _stream_reps(tmp_path, [(14.1, 1), (14.3, 2), (14.2, 3)])
    assert len({p.run.config_key for p in pts}) == 3
    assert sweep.swept_params(pts) == [] and len(sweep.by_key(pts)) == 1
    # the same repetitions, one of them with another scenario code (its ping changed)
    other = _d_point(tmp_path / "x", "reno", "fiber", "stream50", 7.0, 50.0, 14.4, 4)
    cfg = dict(other.run.record["run_config"])
    cfg["traffic"] = [cfg["traffic"][0], {"kind": "ping", "interval_s": 0.2}]
    other.run.record["config_key"] = identity.config_key(cfg)
    other.run.record["run_config"] = cfg
    pts = pts + [other]
    sweep.fill_varied(pts)
    assert sweep.swept_params(pts) == ["config"] and len(sweep.by_key(pts)) == 2


def test_a_derived_knob_set_by_hand_to_several_values_stays_a_key(tmp_path):
    # two values in one repetition: not a function of the other keys and the rep
    pts = _stream_reps(tmp_path, [(5.0, 1), (10.0, 1), (5.0, 2), (10.0, 2)])
    assert sweep.swept_params(pts) == ["bulk_goodput_mbit"]
    assert [len(r) for r in sweep.by_key(pts).values()] == [2, 2]


def test_many_lines_split_into_one_column_per_path(d_points):
    fig = study.cca(d_points)
    panels = [ax for ax in fig.axes if ax.get_title() or ax.get_ylabel() or ax.lines]
    assert len(panels) == 6                                # 2 metrics x 3 paths
    columns = ["fiber", "cellular", "dsl"]                 # in the scenario's sweep order
    assert [ax.get_title() for ax in fig.axes[:3]] == columns
    got = lines(fig, "metric:network:all:aggregate_throughput_mbit:")
    assert len(got) == 9                                   # 3 paths x 3 loads
    for vi, variant in enumerate(("fiber", "dsl", "cellular")):
        for li, load in enumerate(("bulk", "stream50", "stream25")):
            line = got[f"{variant},load={load}"]
            # reno then bbr on x, each the run's own value
            np.testing.assert_allclose(sorted(line.get_ydata()),
                                       [10.0 * vi + li, 10.0 * vi + li + 0.1])
            assert line in fig.axes[columns.index(variant)].lines
    # one load keeps its colour in every column; the categories are dodged apart
    colors = {k: matplotlib.colors.to_hex(v.get_color()) for k, v in got.items()}
    assert colors["fiber,load=bulk"] == colors["dsl,load=bulk"] != colors["fiber,load=stream50"]
    assert len({tuple(v.get_xdata()) for k, v in got.items() if k.startswith("fiber")}) == 3
    # one legend beside the panels, none inside them: 3 loads and 2 references
    assert all(ax.get_legend() is None for ax in fig.axes)
    # the lines in the order the points come (as the metric-vs figures), the references
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "load=bulk", "load=stream50", "load=stream25", "goodput ceiling", "base RTT"]
    assert fig.texts[-1].get_text().endswith("each column has its own y scale")


def test_few_lines_keep_one_column(d_points):
    fiber = [p for p in d_points if p.varied["variant"] == "fiber"]
    fig = study.cca(fiber)
    assert not fig.legends and len(fig.axes) == 2
    assert fig.axes[0].get_legend() is not None


class _StubRun:
    scenario_name = "no_such_scenario"


def _grid(**values):
    """Points over the product of ``values`` (each key swept), on a stub run."""
    import itertools
    keys = list(values)
    pts = []
    for combo in itertools.product(*values.values()):
        p = sweep.Point(_StubRun(), {}, 1)
        p.varied = dict(zip(keys, combo))
        pts.append(p)
    return pts


def test_the_split_takes_the_key_leaving_fewest_lines_a_column():
    # 3 x 4 = 12 lines against cca: b's 4 columns hold 3 lines each, a's 3 hold 4
    assert study._facet(_grid(cca=["x", "y"], a=[1, 2, 3], b=[1, 2, 3, 4]), "cca") == "b"
    # few lines: no split
    assert study._facet(_grid(cca=["x", "y"], a=[1, 2], b=[1, 2, 3, 4]), "cca") is None


def test_the_split_never_takes_a_key_of_one_value_or_too_many():
    # variant has one value: it splits nothing; load's 9 values would be 9 columns
    pts = _grid(cca=["x"], variant=["fiber"], load=list(range(9)), s=[0, 1])
    assert study._facet(pts, "cca") == "s"
    assert study._facet(_grid(cca=["x"], variant=["fiber"], load=list(range(9))),
                        "cca") is None


def test_variant_splits_first_when_its_columns_fit():
    # variant leaves 8 lines a column, load would leave 6: the paths win (their scales)
    pts = _grid(cca=["x"], variant=["a", "b", "c"], load=[1, 2, 3, 4], s=[0, 1])
    assert study._facet(pts, "cca") == "variant"


def test_a_metric_figure_of_many_lines_puts_its_legend_beside(d_points):
    fig = sweep_figures.draw_metric(d_points, "cca", "throughput_mbit")
    assert fig.axes[0].get_legend() is None
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(texts) == 9 + 1 and texts[-1].startswith("link rate")   # the reference last
    # the panel left room for it: it ends left of the legend's box
    fig.canvas.draw()
    box = fig.legends[0].get_window_extent()
    assert fig.axes[0].get_window_extent().x1 <= box.x0
    few = sweep_figures.draw_metric([p for p in d_points if p.varied["variant"] == "fiber"],
                            "cca", "throughput_mbit")
    assert not few.legends and few.axes[0].get_legend() is not None
