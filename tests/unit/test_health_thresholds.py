"""Every health threshold at its boundary: a value just inside passes the check, one just
outside fails it, and every check is shown failing at least once.

The thresholds are the numbers docs/design/health.md documents ("The checks and their
thresholds"), written here as literals, never read from bufferbloat.results.health's constants:
a constant that drifts from its documented value fails a test here (for a threshold T,
T +/- a small step sits on both sides of it; moving T past either step fails one of them).
"""
import os

import numpy as np
import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.results import health as hl
from bufferbloat.results import health_series
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter
from unit.test_health import RATE, _write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# docs/design/health.md, "The checks and their thresholds"
WORK_CONSERVATION_MIN = 0.95       # work_conservation:DEV:KIND >= 0.95
BACKLOG_BYTES = 3000               # an interval counts when the leaf held >= 3000 B ...
MIN_BACKLOGGED_S = 1.0             # ... judged when backlogged >= 1 s
MISSED_TICKS_MAX = 0.05            # sampler_missed_ticks <= 5 %
CONTROLLER_RATE_MIN = 0.95         # controller_rate:DEV:pi >= 0.95
START_LATE_MAX_S = 2.0             # flows_on_time: start <= 2 s late
START_EARLY_MAX_S = 0.2            # starts_not_early: >= 0.2 s before its due time
OWN_CLOCK_EARLY_MAX_S = 1.0        # ... 1 s by a tool's own clock (first_on_s)
IDLE_BELOW_MS = 0.5                # idle_rtt within [base - 0.5 ms,
IDLE_SLACK_MS, IDLE_SLACK_SHARE = 3.0, 0.10     # base + max(3 ms, 10 %)]
OVERRUN_MAX_S = 3.0                # traffic_overrun <= 3 s
GOODPUT_SHARE_MAX = 1.02           # goodput_possible:DIR <= 1.02


def test_the_documented_table_holds_these_numbers():
    """The literals above are docs/design/health.md's: its table row of each check says them."""
    with open(os.path.join(ROOT, "docs", "design", "health.md")) as f:
        rows = {line.split("|")[1].strip(): line for line in f if line.startswith("| `")}
    want = {"`work_conservation:DEV:KIND`": [">= 0.95", ">= 3000 B", "backlogged >= 1 s"],
            "`sampler_missed_ticks`": ["<= 5 %"],
            "`controller_rate:DEV:pi`": [">= 0.95"],
            "`flows_on_time`": ["start <= 2 s late"],
            "`starts_not_early`": ["at most 0.2 s before", "1 s by a tool's own clock",
                                   "faulty"],
            "`idle_rtt`": ["[base - 0.5 ms, base + max(3 ms, 10 %)]"],
            "`traffic_overrun`": ["<= 3 s"],
            "`goodput_possible:DIR`": ["<= 1.02"],
            "`departure_timing:DEV:KIND`": ["+ 1 ms", ">= 100 backlogged gaps"],
            "`sender_kept_up`": ["<= 5 % idle", ">= 2 s of samples"]}
    for check, phrases in want.items():
        assert check in rows, check
        for phrase in phrases:
            assert phrase in rows[check], (check, phrase)


def _verdict_and_ok(run, name, rows=None):
    h = hl.assess(run, rows)
    return h["verdict"], h["checks"][name]["ok"], h["problems"]


# ----------------------------------------------------------------- work conservation
@pytest.mark.parametrize("share, ok", [(WORK_CONSERVATION_MIN + 0.001, True),
                                       (WORK_CONSERVATION_MIN - 0.001, False)])
def test_work_conservation_boundary(tmp_path, share, ok):
    run = _write(tmp_path / "r", send_share=share)
    verdict, got, problems = _verdict_and_ok(run, "work_conservation:s0-eth2:pfifo")
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems
    assert hl.assess(run)["checks"]["work_conservation:s0-eth2:pfifo"]["value"] \
        == pytest.approx(share, abs=2e-4)


def _backlogged_for(path, busy_s, send_share=0.5, total_s=5.0):
    """A run whose leaf holds 30 kB for its first ``busy_s`` seconds (sending at
    ``send_share`` of the rate: a starved emulator) and nothing after."""
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": RATE}, bottleneck_dev="s0-eth2",
                    network={"topology": {"receiver": "h2"}},
                    sampler={"qdisc_devs": ["s0-eth2"]})
    t = np.arange(0, total_s + 0.001, 0.01)
    sent = np.cumsum(np.where(t < busy_s, send_share * RATE * 1e6 / 8 * 0.01, 0.0))
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": ti, "dev": "s0-eth2", "handle": "10:", "parent": "1:1", "kind": "pfifo",
         "qlen_pkts": 20 if ti < busy_s else 0, "backlog_bytes": 30000 if ti < busy_s else 0,
         "sent_bytes": round(s), "drops": 0} for ti, s in zip(t, sent)])
    w.close("ok")
    return load_run(path)


@pytest.mark.parametrize("busy_s, ok", [(MIN_BACKLOGGED_S - 0.05, None),
                                        (MIN_BACKLOGGED_S + 0.05, False)])
def test_work_conservation_is_judged_from_one_backlogged_second(tmp_path, busy_s, ok):
    """Half the rate while backlogged: not judged below 1 s of backlog (ok None, the run
    not degraded by it), judged (and failed) above."""
    c = hl.assess(_backlogged_for(tmp_path / "r", busy_s))["checks"][
        "work_conservation:s0-eth2:pfifo"]
    assert c["ok"] is ok, c
    assert c["value"] == pytest.approx(0.5, abs=0.01)
    assert abs(c["backlogged_s"] - MIN_BACKLOGGED_S) <= 0.07


def test_an_interval_counts_from_3000_bytes_at_its_end():
    """The leaf alternates between a full interval's worth (20 kB) and 3000 B -/+ 1 B:
    the intervals ending at 2999 B are not judged, those ending at 3000 B are."""
    t = np.arange(0, 2.001, 0.01)
    sent = np.cumsum(np.full(t.size, 0.5 * RATE * 1e6 / 8 * 0.01))
    for end, judged in ((BACKLOG_BYTES - 1, False), (BACKLOG_BYTES, True)):
        backlog = np.where(np.arange(t.size) % 2 == 0, 20000, end)
        ratio, span = health_series.work_conservation(t, backlog, sent, RATE)
        if judged:
            assert ratio == pytest.approx(0.5, rel=0.01) and span == pytest.approx(1.0,
                                                                                   abs=0.02)
        else:
            assert (ratio, span) == (None, 0.0)


def test_an_interval_counts_when_its_start_holds_what_the_link_sends_in_it():
    """At 10 Mbit/s a 10 ms interval sends 12 500 B: a leaf holding 12 400 B may empty and
    idle for a reason (not judged), one holding 12 600 B may not (judged)."""
    t = np.arange(0, 2.001, 0.01)
    sent = np.cumsum(np.full(t.size, 0.5 * RATE * 1e6 / 8 * 0.01))
    per_interval = RATE * 1e6 / 8 * 0.01
    assert per_interval == 12500
    assert health_series.work_conservation(t, np.full(t.size, per_interval - 100), sent, RATE) \
        == (None, 0.0)
    ratio, span = health_series.work_conservation(t, np.full(t.size, per_interval + 100),
                                                  sent, RATE)
    assert ratio == pytest.approx(0.5, rel=0.01) and span == pytest.approx(2.0, abs=0.02)


# ----------------------------------------------------------------- the sampler
@pytest.mark.parametrize("missed, ok", [(int(MISSED_TICKS_MAX * 1000), True),
                                        (int(MISSED_TICKS_MAX * 1000) + 1, False)])
def test_sampler_missed_ticks_boundary(tmp_path, missed, ok):
    """Of 1000 ticks, 50 missed is 5 % (allowed: <=), 51 is not."""
    verdict, got, problems = _verdict_and_ok(_write(tmp_path / "r", missed=missed),
                                             "sampler_missed_ticks")
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems


# ----------------------------------------------------------------- the PI controller
def _pi_run(path, hz, freq=160, seconds=20):
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": RATE}, bottleneck_dev="s0-eth2",
                    network={"topology": {"receiver": "h2", "qdisc": {
                        "kind": "pi", "params": {"freq_hz": freq}}}})
    t = np.arange(0, seconds + 0.001, 0.01)
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": ti, "dev": "s0-eth2", "handle": "10:", "parent": "1:1", "kind": "pi",
         "qlen_pkts": 0, "backlog_bytes": 0, "sent_bytes": 0, "drops": 0,
         "ctl_updates": round(ti * hz)} for ti in t])
    w.close("ok")
    return load_run(path)


@pytest.mark.parametrize("share, ok", [(CONTROLLER_RATE_MIN + 0.002, True),
                                       (CONTROLLER_RATE_MIN - 0.002, False)])
def test_controller_rate_boundary(tmp_path, share, ok):
    verdict, got, problems = _verdict_and_ok(_pi_run(tmp_path / "r", share * 160),
                                             "controller_rate:s0-eth2:pi")
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems


# ----------------------------------------------------------------- flows
@pytest.mark.parametrize("late_s, ok", [(START_LATE_MAX_S - 0.01, True),
                                        (START_LATE_MAX_S + 0.01, False)])
def test_flow_lateness_boundary(tmp_path, late_s, ok):
    run = _write(tmp_path / "r", late_s=late_s)
    verdict, got, problems = _verdict_and_ok(run, "flows_on_time")
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems
    assert hl.assess(run)["checks"]["flows_on_time"]["late"] == (0 if ok else 1)


@pytest.mark.parametrize("key, early_s, ok", [
    ("t_launch", START_EARLY_MAX_S - 0.01, True),
    ("t_launch", START_EARLY_MAX_S + 0.01, False),
    ("first_on_s", OWN_CLOCK_EARLY_MAX_S - 0.01, True),
    ("first_on_s", OWN_CLOCK_EARLY_MAX_S + 0.01, False)])
def test_flow_earliness_boundary(tmp_path, key, early_s, ok):
    """Early beyond the slack is a fault of the run (faulty), never degraded."""
    run = _write(tmp_path / "r")
    run.record["traffic_results"][0][key] = 1.0 - early_s   # scheduled at 1.0
    h = hl.assess(run)
    check = h["checks"]["starts_not_early"]
    assert check["ok"] is ok and check["early"] == (0 if ok else 1), check
    assert h["verdict"] == ("healthy" if ok else "faulty"), h


def test_a_flow_that_never_started_or_moved_nothing_fails(tmp_path):
    run = _write(tmp_path / "r")
    del run.record["traffic_results"][0]["t_start"]
    check = hl.assess(run)["checks"]["flows_on_time"]
    assert check["ok"] is False and check["never_started"] == 1, check
    run = _write(tmp_path / "s")
    run.record["traffic_results"][1].update(bytes_sent=0, bytes_received=0)
    check = hl.assess(run)["checks"]["flows_on_time"]
    assert check["ok"] is False and check["no_data"] == 1 and "carried no data" in \
        check["what"], check


# ----------------------------------------------------------------- idle RTT
@pytest.mark.parametrize("base, p50, ok", [
    (20.0, 20.0 - IDLE_BELOW_MS + 0.01, True),
    (20.0, 20.0 - IDLE_BELOW_MS - 0.01, False),
    # 10 % of 20 ms is 2 ms: the 3 ms floor applies
    (20.0, 20.0 + IDLE_SLACK_MS - 0.01, True),
    (20.0, 20.0 + IDLE_SLACK_MS + 0.01, False),
    # 10 % of 60 ms is 6 ms: above the 3 ms floor, the share applies
    (60.0, 60.0 + IDLE_SLACK_SHARE * 60 - 0.01, True),
    (60.0, 60.0 + IDLE_SLACK_SHARE * 60 + 0.01, False),
    (60.0, 60.0 - IDLE_BELOW_MS - 0.01, False),
])
def test_idle_rtt_boundaries(tmp_path, base, p50, ok):
    run = _write(tmp_path / "r", idle_p50=p50)
    run.record["base_rtt_ms"] = base
    verdict, got, problems = _verdict_and_ok(run, "idle_rtt")
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems


# ----------------------------------------------------------------- overrun
@pytest.mark.parametrize("over_s, ok", [(OVERRUN_MAX_S - 0.01, True),
                                        (OVERRUN_MAX_S + 0.01, False)])
def test_traffic_overrun_boundary(tmp_path, over_s, ok):
    run = _write(tmp_path / "r")
    run.record["traffic_overrun_s"] = over_s
    verdict, got, problems = _verdict_and_ok(run, "traffic_overrun")
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems


# ----------------------------------------------------------------- goodput
@pytest.mark.parametrize("direction", ["up", "down"])
@pytest.mark.parametrize("share, ok", [(GOODPUT_SHARE_MAX - 0.001, True),
                                       (GOODPUT_SHARE_MAX + 0.001, False)])
def test_goodput_possible_boundary(tmp_path, direction, share, ok):
    """Against the forward rate up, the reverse rate down (4 Mbit/s here)."""
    run = _write(tmp_path / "r")
    run.record["params"]["reverse_mbit"] = 4.0
    rate = RATE if direction == "up" else 4.0
    rows = [{"scope": "network", "name": "all", "metric": f"goodput_{direction}_mbit",
             "value": share * rate}]
    verdict, got, problems = _verdict_and_ok(run, f"goodput_possible:{direction}", rows)
    assert got is ok and verdict == ("healthy" if ok else "degraded"), problems


def test_goodput_above_the_link_from_the_recorded_bytes_fails(tmp_path):
    """The whole path: receivers acknowledging 3 % more than the link carries (a counting
    bug) makes the run degraded by goodput_possible, and by nothing else."""
    from bufferbloat.results import metrics as m
    run = _write(tmp_path / "r", send_share=1.03)
    h = hl.assess(run, m.compute_metrics(run))
    assert h["checks"]["goodput_possible:up"]["ok"] is False
    assert h["checks"]["goodput_possible:up"]["value"] == pytest.approx(1.03, abs=0.005)
    assert h["verdict"] == "degraded" and len(h["problems"]) == 1, h["problems"]


# ----------------------------------------------------------------- greedy senders
APP_LIMITED_MAX = 0.05             # sender_kept_up <= 5 % idle


def _sender_run(path, idle_share, greedy=True, window_s=10.0, late_s=None):
    """One greedy flow sampled every 10 ms whose socket had nothing to send for
    ``idle_share`` of the time (busy_us grows by 1 - idle_share per second); with
    ``late_s``, one that sent nothing but its connection's cookie until then and was
    busy all the time after."""
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": RATE}, traffic_start_s=0.0,
                    duration_s=window_s + 1.0, warmup_s=0.0,
                    traffic_results=[{"name": "long", "flow": "long", "greedy": greedy}])
    t = np.arange(0, window_s + 1.0, 0.01)

    def busy(ti):
        if late_s is not None:
            return round(max(0.0, ti - late_s) * 1e6)
        return round(ti * (1 - idle_share) * 1e6)

    def sent(ti):
        return 37 if late_s is not None and ti < late_s else 37 + round(ti * 1e6)
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], [
        {"t": ti, "flow": "long", "host": "h1", "sport": 40000, "cca": "cubic",
         "busy_us": busy(ti), "rwnd_limited_us": 0, "bytes_sent": sent(ti),
         "sndbuf_limited_us": round(ti * 0.5e6)} for ti in t])
    w.close("ok")
    return load_run(path)


@pytest.mark.parametrize("idle, ok", [(APP_LIMITED_MAX - 0.002, True),
                                      (APP_LIMITED_MAX + 0.002, False)])
def test_sender_kept_up_boundary(tmp_path, idle, ok):
    verdict, got, problems = _verdict_and_ok(_sender_run(tmp_path / "r", idle),
                                             "sender_kept_up")
    assert got is ok and (verdict == "degraded") is (not ok)
    assert bool(problems) is (not ok)


def test_sender_shares_name_the_limits_and_a_paced_flow_is_not_judged(tmp_path):
    c = hl.assess(_sender_run(tmp_path / "a", 0.02))["checks"]["sender_kept_up"]
    (flow,) = c["flows"]
    assert flow["app_limited_share"] == pytest.approx(0.02, abs=0.001)
    assert flow["sndbuf_limited_share"] == pytest.approx(0.5, abs=0.001)
    assert flow["rwnd_limited_share"] == 0.0
    # a flow not meant to be greedy (paced, on-off) idles by design: not judged
    assert "sender_kept_up" not in hl.assess(_sender_run(tmp_path / "b", 0.5,
                                                         greedy=False))["checks"]
    # less than 2 s of samples in the window: not judged
    assert "sender_kept_up" not in hl.assess(_sender_run(tmp_path / "c", 0.5,
                                                         window_s=1.0))["checks"]


def test_a_flow_that_began_late_is_named_a_late_start(tmp_path):
    """Under TCG an iperf3 flow may send its first data seconds after its launch: the
    check still counts the time before as idle (the flow measured the emulator), and
    says it was a late start, when its data began (docs/design/health.md)."""
    c = hl.assess(_sender_run(tmp_path / "l", 0.0, late_s=2.0))["checks"]["sender_kept_up"]
    (flow,) = c["flows"]
    assert flow["first_data_s"] == pytest.approx(2.0, abs=0.011)
    assert flow["app_limited_share"] == pytest.approx(0.2, abs=0.01)
    assert c["ok"] is False and "its first data 2.0 s after the start: a late start" \
        in c["what"], c["what"]
    # a flow idle in mid-run is not called late
    c = hl.assess(_sender_run(tmp_path / "m", 0.1))["checks"]["sender_kept_up"]
    assert c["flows"][0]["first_data_s"] == pytest.approx(0.01, abs=0.011)
    assert c["ok"] is False and "late start" not in c["what"]


def test_greedy_labels_include_an_iperf_parts_streams():
    rec = {"traffic_results": [
        {"name": "p", "flow": "p", "greedy": True, "streams": ["p-1", "p-2"]},
        {"name": "npm", "flows": [{"flow": "bulk", "greedy": True},
                                  {"flow": "stream", "greedy": False}]},
        {"name": "ping"}]}
    assert health_series.greedy_labels(rec) == {"p", "p-1", "p-2", "bulk"}
