"""Study D's table and bag plot (plots/study_d.py) on hand-made runs."""
import numpy as np
import pytest
from matplotlib.path import Path

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.plots import study_d
from bufferbloat.plots.sweep import Point
from bufferbloat.plots.sweep_tables import write_tables
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter


def _run(path, cca, srtt_ms, owd_ms, goodput, degraded=False):
    w = RunWriter(path)
    w.record.update(scenario={"name": "d1_cca_paths", "family": "D"},
                    params={"bottleneck_mbit": 15, "cca": cca},
                    knobs={"load": "bulk"},
                    health={"verdict": "degraded" if degraded else "healthy"})
    t = np.round(np.arange(0, 5.0001, 0.01), 6)
    w.add_rows("tcp", SERIES_COLUMNS["tcp"],
               [{"t": ti, "flow": "bulk", "host": "h1", "cca": cca, "cwnd_pkts": 10,
                 "srtt_us": srtt_ms * 1e3, "bytes_acked": 1000 * i}
                for i, ti in enumerate(t)])
    w.add_rows("npm_msg", SERIES_COLUMNS["npm_msg"],
               [{"flow": "bulk", "seq": i, "t_sent": 0.05 * i, "t_recv": 0.05 * i + owd_ms / 1e3,
                 "size_bytes": 1448} for i in range(90)])
    w.close("ok")
    rows = [{"scope": "network", "name": "all", "metric": "goodput_up_mbit",
             "value": goodput, "unit": "Mbit/s"},
            {"scope": "flow", "name": "bulk", "metric": "srtt_mean_ms", "value": srtt_ms,
             "unit": "ms"},
            {"scope": "flow", "name": "bulk", "metric": "owd_mean_ms", "value": owd_ms,
             "unit": "ms"},
            {"scope": "flow", "name": "bulk", "metric": "ssthresh_changes", "value": 4,
             "unit": ""}]
    return Point(load_run(path), {"cca": cca, "variant": "fiber"}, 1, {"cca": cca}, rows)


def test_bag_holds_half_the_points_around_the_median():
    rng = np.random.default_rng(3)
    xy = rng.normal([50, 20], [10, 4], size=(4000, 2))
    med, bag_poly, fence_poly, out = study_d.bag(xy)
    assert med == pytest.approx([50, 20], abs=0.6)
    inside = Path(bag_poly).contains_points(xy)
    assert inside.mean() == pytest.approx(0.5, abs=0.03)
    # the fence holds nearly everything of a normal cloud (3 x the bag's radius)
    assert len(out) < 0.01 * len(xy)
    assert Path(fence_poly).contains_points(xy).mean() > 0.99


def test_pairs_table_and_figure(tmp_path):
    pts = [_run(tmp_path / "a1", "reno", 30, 12, 14.0),
           _run(tmp_path / "a2", "reno", 40, 14, 13.0),
           _run(tmp_path / "a3", "reno", 99, 99, 1.0, degraded=True),
           _run(tmp_path / "b", "cubic", 60, 25, 14.5)]
    xy = study_d.pairs(pts[0].run)
    assert xy.shape == (90, 2) and xy[:, 0] == pytest.approx(30) and \
        xy[:, 1] == pytest.approx(12)
    rows = {r["cca"]: r for r in study_d.table_rows(pts)}
    assert rows["reno"]["reps"] == 3 and rows["reno"]["degraded"] == 1
    assert rows["reno"]["goodput_mbit"] == pytest.approx(13.5)     # degraded left out
    assert rows["reno"]["owd_mean_ms"] == pytest.approx(13)
    assert rows["cubic"]["ssthresh_changes"] == 4 and rows["cubic"]["variant"] == "fiber"
    paths = write_tables(pts, str(tmp_path / "fig"), stem="d1-table")
    assert any(p.endswith("d1-table-study-d.csv") for p in paths)
    ax = study_d.draw_bag(pts).axes[0]
    gids = {a.get_gid() for a in ax.get_children()}
    assert {"bag:reno", "median:reno", "bag:cubic"} <= gids
    med = [ln for ln in ax.get_lines() if ln.get_gid() == "median:reno"][0]
    assert med.get_xdata()[0] == pytest.approx(35) and med.get_ydata()[0] == pytest.approx(13)
