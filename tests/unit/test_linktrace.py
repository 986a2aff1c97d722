"""Varying links: mahimahi traces and step schedules parsed and validated before any
network exists, the generator and the CSV converter, the capacity series' metrics."""
import pytest

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.net import linktrace, tracegen
from bufferbloat.results import capacity
from bufferbloat.run import identity
from bufferbloat.run.resolved import resolve_run
from bufferbloat.scenarios import catalogue


def test_mahimahi_windows_and_wrap(tmp_path):
    p = tmp_path / "t.trace"
    p.write_text("0\n0\n5\n10\n10\n20\n")
    t = linktrace.load_trace(str(p))
    # period 20 ms: the line at 20 wraps to 0 (3 opportunities), 5 -> window 0
    assert t.window_bytes == [4 * 1500, 2 * 1500]
    assert t.rates_bps() == [4_800_000, 2_400_000]
    assert t.capacity_bytes(3) == [6000, 3000, 6000]


def test_period_not_a_multiple_of_10_ms_is_repeated():
    t = linktrace.LinkTrace(linktrace.windows_of_times([3, 15]), "trace", "x", "0")
    assert len(t.window_bytes) == 3       # lcm(15, 10) = 30 ms
    assert sum(t.window_bytes) == 2 * 2 * 1500


@pytest.mark.parametrize("text, allowed", [
    ("1\nx\n", "one non-negative integer"), ("5\n3\n", "non-decreasing"),
    ("", "at least one line"), ("0\n0\n", "at least one line"),
    ("1\n-2\n", "one non-negative integer")])
def test_bad_traces_are_refused(tmp_path, text, allowed):
    p = tmp_path / "bad.trace"
    p.write_text(text)
    with pytest.raises(ParameterError, match=allowed):
        linktrace.load_trace(str(p))


def test_a_trace_above_what_htb_is_given_here_is_refused():
    times = [1] * 10_000 + [10]        # 10 000 x 1500 B in 10 ms: 12 Gbit/s
    with pytest.raises(ParameterError, match="at most 10000 Mbit/s"):
        linktrace.windows_of_times(times)


def test_missing_file_and_both_knobs():
    with pytest.raises(ParameterError, match="readable"):
        linktrace.load_trace("/nonexistent/trace")
    with pytest.raises(ParameterError, match="unset when link_trace"):
        linktrace.from_params({"link_trace": "a", "link_schedule": "1:1"})


def test_schedule_steps_and_floor():
    t = linktrace.schedule_trace("0.02:8,0.01:0")
    assert t.rates_bps() == [8_000_000, 8_000_000, 1000]
    assert t.summary()["zero_windows"] == 1
    assert t.rates_bps(0.5)[:2] == [4_000_000, 4_000_000]
    for bad in ("2", "2:x", "0:5", "0.005:5", "1:20000", "1:-1"):
        with pytest.raises(ParameterError):
            linktrace.parse_schedule(bad)


def test_knobs_on_a_dumbbell_validated_and_keyed_by_content(tmp_path):
    scn = catalogue()["a1_fifo"]
    p1, p2 = tmp_path / "a.trace", tmp_path / "b.trace"
    p1.write_text(tracegen.mahimahi_text(tracegen.constant(1, 6)))
    p2.write_text(p1.read_text())
    r1 = resolve_run(scn, {"link_trace": str(p1)}, max_rate_mbit=None)
    r2 = resolve_run(scn, {"link_trace": str(p2)}, max_rate_mbit=None)
    assert r1.config_key == r2.config_key           # same content, other path
    assert r1.config["params"]["link_trace"].startswith("sha256:")
    plain = resolve_run(scn, {}, max_rate_mbit=None)
    assert "link_trace" not in plain.config["params"]
    assert r1.config_key != plain.config_key
    s = resolve_run(scn, {"link_schedule": "2:8,2:2"}, max_rate_mbit=None)
    assert s.topo.link_trace.period_s == 4
    with pytest.raises(UsageError):
        resolve_run(scn, {"link_schedule": "2:8,2"}, max_rate_mbit=None)
    assert identity.short(s.key)


def test_generator_rates_are_what_was_asked():
    times = tracegen.opportunities(tracegen.constant(2, 12))
    assert times[-1] == 2000 and len(times) == 2000     # 12 Mbit/s: 1 per ms
    sq = tracegen.square(8, 2, 8, 2)
    assert sq == [(2, 2), (2, 8), (2, 2), (2, 8)]
    t = linktrace.LinkTrace(linktrace.windows_of_times(tracegen.opportunities(sq)),
                            "trace", "x", "0")
    assert t.period_s == 8
    mean = sum(t.rates_bps()) / len(t.rates_bps()) / 1e6
    assert abs(mean - 5) < 0.01


def test_random_walk_is_seeded():
    a = tracegen.random_walk(10, 6, seed=3)
    assert a == tracegen.random_walk(10, 6, seed=3)
    assert a != tracegen.random_walk(10, 6, seed=4)
    assert len(a) == 100 and all(0 <= m <= 24 for _, m in a)


def test_csv_converter(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("t,mbit\n0,12\n1,0\n1.5,24\n2,0\n")
    steps = tracegen.read_rate_csv(str(p))
    assert steps == [(1, 12), (0.5, 0), (0.5, 24)]
    p.write_text("0,1\n2,1\n1,1\n")
    with pytest.raises(UsageError, match="increase"):
        tracegen.read_rate_csv(str(p))


def _rows(rate, sent_per_window, n=30, backlog=3000):
    return [{"t": k * 0.01, "k": k, "rate": rate, "sent": k * sent_per_window,
             "backlog": backlog, "drops": 0} for k in range(n)]


def test_capacity_metrics_and_health():
    wins = capacity.windows(_rows(8_000_000, 10_000))
    m = capacity.metrics(wins, loop_stats={"ticks": 99, "missed_ticks": 1})
    assert m["utilisation"] == 1.0 and m["ratio_p50"] == 1.0
    assert m["ratio_windows"] == 2 and m["missed_ticks_pct"] == 1.0
    assert capacity.health(m) == []
    over = capacity.metrics(capacity.windows(_rows(2_000_000, 10_000)))
    assert over["over_capacity_windows"] == 29
    assert capacity.health(over)
    rows = _rows(8_000_000, 10_000)
    del rows[5]                                  # a missed tick: its windows left out
    assert len(capacity.windows(rows)) == 27


def test_health_judges_the_replay_not_the_constant_link():
    checks = {"work_conservation:s0-eth2:pfifo": {"ok": False, "value": 0.5},
              "sampler_missed_ticks": {"ok": True}}
    rec = {"link_trace": {"metrics": {"utilisation": 0.99, "missed_ticks_pct": 0.2,
                                      "over_capacity_windows": 0, "change_errors": 0}}}
    out = capacity.health_checks(rec, checks)
    assert out["link_replay"]["ok"] is True
    assert checks["work_conservation:s0-eth2:pfifo"]["ok"] is None
    assert checks["sampler_missed_ticks"]["ok"] is True
    assert "failed" not in out["link_replay"]["what"]
    rec["link_trace"]["metrics"]["missed_ticks_pct"] = 3.0
    bad = capacity.health_checks(rec, {})["link_replay"]
    assert bad["ok"] is False and "(failed: missed ticks 3.0 %)" in bad["what"]
    assert capacity.health_checks({}, checks) == {}


def test_health_judges_the_reverse_replay_on_its_own_device():
    """link_trace_up varies the receiver's egress only: its check is link_replay_up,
    the bottleneck's constant-link checks stay judged, the reverse device's are not."""
    checks = {"work_conservation:s0-eth2:pie": {"ok": True},
              "work_conservation:h2-eth0:pie": {"ok": False},
              "departure_timing:h2-eth0:pie": {"ok": True}}
    rec = {"bottleneck_dev": "s0-eth2",
           "link_trace_up": {"metrics": {"utilisation": 0.9, "missed_ticks_pct": 0.0,
                                         "over_capacity_windows": 0, "change_errors": 0}}}
    out = capacity.health_checks(rec, checks)
    assert list(out) == ["link_replay_up"]
    assert out["link_replay_up"]["ok"] is False
    assert "reverse link" in out["link_replay_up"]["what"]
    assert "(failed: utilisation 0.9)" in out["link_replay_up"]["what"]
    assert checks["work_conservation:s0-eth2:pie"]["ok"] is True
    assert checks["work_conservation:h2-eth0:pie"]["ok"] is None
    assert checks["departure_timing:h2-eth0:pie"]["ok"] is None
    rec["link_trace"] = rec["link_trace_up"]
    out = capacity.health_checks(rec, checks)
    assert list(out) == ["link_replay", "link_replay_up"]
    assert checks["work_conservation:s0-eth2:pie"]["ok"] is None


def test_capacity_figure_from_the_series(tmp_path):
    from bufferbloat.plots import capacity as capacity_plot
    series = tmp_path / "series"
    series.mkdir()
    lines = ["t_s,window,rate_bps,sent_bytes,backlog_bytes,qlen_pkts,drops"]
    lines += [f"{k / 100:.6f},{k},8000000,{k * 10000},3000,2,0" for k in range(50)]
    (series / "link-trace.csv").write_text("\n".join(lines) + "\n")
    capacity.record(str(series))
    assert (series / capacity.CAPACITY_CSV).read_text().startswith(
        "t_s,capacity_bytes,delivered_bytes,backlogged\n0.00,10000.0,10000,1")

    from bufferbloat.results.records import Run
    fig = capacity_plot.draw(Run(str(tmp_path), {"params": {"qdisc": "pfifo"},
                                                 "scenario": "a1_fifo"}))
    assert fig is not None and len(fig.axes) == 2


def test_the_reverse_direction_replays_its_own_trace(tmp_path):
    scn = catalogue()["a1_fifo"]
    p = tmp_path / "up.trace"
    p.write_text(tracegen.mahimahi_text(tracegen.constant(2, 3)))
    r = resolve_run(scn, {"link_trace_up": str(p)}, max_rate_mbit=None)
    assert r.topo.link_trace is None and r.topo.link_trace_up.period_s == 2
    assert r.config["params"]["link_trace_up"] == f"sha256:{r.topo.link_trace_up.sha256}"
    from bufferbloat import describe
    text = "\n".join(describe.describe(scn, {"link_trace_up": str(p)}))
    assert "reverse capacity varies" in text
    (tmp_path / "bad.trace").write_text("3\n1\n")
    with pytest.raises(ParameterError, match="link_trace_up"):
        resolve_run(scn, {"link_trace_up": str(tmp_path / "bad.trace")}, max_rate_mbit=None)


def test_a_burst_saved_at_a_low_rate_grows_with_the_next():
    rows = [{"t": k * 0.01, "k": k, "rate": 2_000_000 if k < 5 else 8_000_000,
             "sent": 0, "backlog": 0, "drops": 0} for k in range(10)]
    growth = [w["burst_growth"] for w in capacity.windows(rows)]
    assert growth[5] == 4.0 and growth[4] == 1.0 and growth[6] == 1.0
