"""Study C's figures on synthetic c1-like runs with known values: one line per qdisc
against the number of flows (means and spreads over repetitions), PI's q_ref and RED's
thresholds, and the instantaneous-queue overlay at the largest load."""
import numpy as np
import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.plots import study_c
from bufferbloat.plots.sweep import Point
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter

QDISCS = {"red": {"min_bytes": 4000, "max_bytes": 12000},
          "pi": {"q_ref_pkts": 14}}


def _point(tmp_path, kind, flows, rep, qlen):
    w = RunWriter(tmp_path / f"{kind}-{flows}-{rep}")
    w.record.update(params={"bottleneck_mbit": 10, "qdisc": kind}, knobs={"flows": flows},
                    network={"topology": {"qdisc": {"kind": kind, "params": QDISCS[kind]}}})
    t = np.arange(0, 2, 0.01)
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": ti, "dev": "s0-eth2", "handle": "10:", "parent": "1:1", "kind": kind,
         "qlen_pkts": qlen, "backlog_bytes": qlen * 576, "sent_bytes": 0} for ti in t])
    w.close("ok")
    rows = [{"scope": "link", "name": f"s0-eth2:{kind}", "metric": m, "value": v}
            for m, v in (("qlen_mean_pkts", qlen), ("utilization", 0.9),
                         ("mark_drop_pct", flows / 10), ("qdelay_mean_ms", qlen * 0.46))]
    return Point(load_run(tmp_path / f"{kind}-{flows}-{rep}"), {"flows": flows}, rep=rep,
                 varied={"flows": flows}, rows=rows)


@pytest.fixture
def points(tmp_path):
    # RED's queue grows with load (8 -> 16 pkts); PI holds ~14; two repetitions each
    return [_point(tmp_path, k, n, rep, (8 if n == 20 else 16) + rep if k == "red" else 13 + rep)
            for k in ("red", "pi") for n in (20, 80) for rep in (1, 2)]


def _line(fig, gid):
    for ax in fig.axes:
        for c in ax.containers:       # errorbar containers carry the gid on their line
            if c.lines[0].get_gid() == gid:
                return c.lines[0].get_xydata()
        for line in ax.lines:
            if line.get_gid() == gid:
                return line.get_xydata()
    raise AssertionError(f"no {gid}")


def test_load_panels_show_means_per_qdisc(points):
    fig = study_c.draw_load(points)
    red = _line(fig, "metric:qlen_mean_pkts:red")
    pi = _line(fig, "metric:qlen_mean_pkts:pi")
    assert red.tolist() == [[20, 9.5], [80, 17.5]]        # mean of reps 1 and 2
    assert pi.tolist() == [[20, 14.5], [80, 14.5]]
    gids = {ln.get_gid() for ax in fig.axes for ln in ax.lines}
    assert {"theory:qref", "theory:red-min", "theory:red-max"} <= gids
    qref = _line(fig, "theory:qref")
    assert qref[0][1] == 14


def test_queue_overlay_at_the_largest_load(points):
    fig = study_c.draw_queue_overlay(points)
    assert "80 flows" in fig.axes[0].get_title() or "80 flows" in fig._suptitle.get_text()
    assert np.all(_line(fig, "queue:red")[:, 1] == 17)       # rep 1 at 80 flows
    assert np.all(_line(fig, "queue:pi")[:, 1] == 14)
    red_min = _line(fig, "theory:red-min")
    assert red_min[0][1] == pytest.approx(4000 / 576)


def test_degraded_runs_are_left_out(points):
    for p in points:
        if p.run.params["qdisc"] == "red" and p.rep == 2:
            p.run.record["health"] = {"verdict": "degraded"}
    red = _line(study_c.draw_load(points), "metric:qlen_mean_pkts:red")
    assert red.tolist() == [[20, 9.0], [80, 17.0]]
