"""Study D's and E's per-run figures (plots/flowseries.py) on hand-made runs: what is
drawn is the stored series."""
import numpy as np
import pytest

from bufferbloat import plots
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter


def _run(tmp_path):
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": 10.0})
    t = np.round(np.arange(0, 5.0001, 0.1), 6)
    w.add_rows("tcp", SERIES_COLUMNS["tcp"],
               [{"t": ti, "flow": f, "host": "h1", "cca": "reno", "cwnd_pkts": 10,
                 "srtt_us": 20_000 + 1000 * k, "in_flight_pkts": 5 + k,
                 "bytes_acked": round(ti * (k + 1) * 125_000)}
                for k, f in enumerate(("a", "b")) for ti in t])
    w.add_rows("npm_msg", SERIES_COLUMNS["npm_msg"],
               [{"flow": "a", "seq": i, "t_sent": i * 0.05, "t_recv": i * 0.05 + 0.012,
                 "size_bytes": 1448} for i in range(100)])
    w.close("ok")
    return load_run(tmp_path / "r")


def _line(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert found, [ln.get_gid() for ln in ax.get_lines()]
    return found[0]


def test_owd_figure_draws_every_message_and_the_srtt(tmp_path):
    figs = plots.draw_figures(_run(tmp_path), ["owd"])
    ax_r, ax_o = figs["owd"].axes
    owd = _line(ax_o, "owd:a")
    assert len(owd.get_xdata()) == 100
    assert np.asarray(owd.get_ydata()) == pytest.approx(12.0)
    assert np.asarray(_line(ax_r, "srtt:b").get_ydata()) == pytest.approx(21.0)
    assert "(ms)" in ax_o.get_ylabel()


def test_flows_figure_in_flight_srtt_and_binned_throughput(tmp_path):
    ax_i, ax_r, ax_t = plots.draw_figures(_run(tmp_path), ["flows"])["flows"].axes
    assert np.asarray(_line(ax_i, "inflight:b").get_ydata()) == pytest.approx(6)
    assert np.asarray(_line(ax_r, "srtt:a").get_ydata()) == pytest.approx(20)
    # 1 and 2 Mbit/s, over 1 s bins
    assert np.asarray(_line(ax_t, "flow:a").get_ydata()) == pytest.approx(1.0)
    assert np.asarray(_line(ax_t, "flow:b").get_ydata()) == pytest.approx(2.0)


def test_figures_need_their_series(tmp_path):
    w = RunWriter(tmp_path / "empty")
    w.close("ok")
    assert plots.draw_figures(load_run(tmp_path / "empty"), ["owd", "flows"]) == {}
