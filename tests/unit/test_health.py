"""The health verdict (did the emulator keep up?) on synthetic runs with known answers,
the receiver-side goodput, and what a degraded run does to flags, tables and exit codes."""
import json

import numpy as np
import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.results import health as hl
from bufferbloat.results import health_series, metrics_flows
from bufferbloat.results import metrics as m
from bufferbloat.results.records import find_runs, load_run
from bufferbloat.results.records_writer import RunWriter

RATE = 10.0  # Mbit/s
FIXTURES = "tests/fixtures/runs"


def _write(path, send_share=1.0, missed=0, late_s=0.5, idle_p50=20.5, backlog=30000,
           flows=2):
    """A 10 s run on a 10 Mbit/s bottleneck whose leaf holds ``backlog`` bytes and sends
    at ``send_share`` of the rate; ``flows`` flows at equal shares, the last one
    ``late_s`` late; the sampler missed ``missed`` of 1000 ticks."""
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": RATE}, base_rtt_ms=20.0,
                    bottleneck_dev="s0-eth2",
                    network={"topology": {"receiver": "h2"}},
                    sampler={"samples": 1000 - missed, "missed_ticks": missed,
                             "period_ms": 10.0, "qdisc_devs": ["s0-eth2"]},
                    idle_rtt={"p50_ms": idle_p50, "min_ms": 20.1, "samples": 20},
                    traffic_overrun_s=0.4,
                    traffic_results=[{"flow": f"f{i}", "t_start": 1.0 + (late_s if i == flows
                                                                         else 0.1),
                                      "scheduled_s": 1.0, "bytes_sent": 10**6,
                                      "bytes_received": 10**6} for i in range(1, flows + 1)])
    t = np.arange(0, 10.001, 0.01)
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": ti, "dev": "s0-eth2", "handle": "10:", "parent": "1:1", "kind": "pfifo",
         "qlen_pkts": backlog // 1500, "backlog_bytes": backlog,
         "sent_bytes": round(ti * send_share * RATE * 1e6 / 8), "drops": 0} for ti in t])
    share = send_share * RATE / flows
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], [
        {"t": ti, "flow": f"f{i}", "host": "h1", "cca": "cubic", "cwnd_pkts": 10,
         "srtt_us": 40000, "bytes_acked": round(ti * share * 1e6 / 8)}
        for i in range(1, flows + 1) for ti in t[::10]])
    w.close("ok")
    return load_run(path)


def test_work_conservation_counts_backlogged_intervals_only():
    t = np.arange(0, 4.001, 0.01)
    # backlogged for 2 s sending at 0.6 of 10 Mbit/s, then idle (empty queue) for 2 s
    backlog = np.where(t < 2.0, 20000, 0)
    sent = np.cumsum(np.where(t < 2.0, 0.6 * RATE * 1e6 / 8 * 0.01, 0.0))
    ratio, span = health_series.work_conservation(t, backlog, sent, RATE)
    assert ratio == pytest.approx(0.6, rel=0.01)
    assert span == pytest.approx(2.0, abs=0.02)
    assert health_series.work_conservation(t, np.zeros_like(t), sent, RATE) == (None, 0.0)


def test_healthy_run(tmp_path):
    h = hl.assess(_write(tmp_path / "r"))
    assert h["verdict"] == "healthy", h["problems"]
    wc = h["checks"]["work_conservation:s0-eth2:pfifo"]
    assert wc["value"] == pytest.approx(1.0, abs=0.01) and wc["ok"]
    assert h["checks"]["flows_on_time"]["ok"] and h["checks"]["idle_rtt"]["ok"]


@pytest.mark.parametrize("kwargs, check", [
    (dict(send_share=0.6), "work_conservation:s0-eth2:pfifo"),
    (dict(missed=200), "sampler_missed_ticks"),
    (dict(late_s=49.0), "flows_on_time"),
    (dict(idle_p50=35.0), "idle_rtt"),     # 15 ms above a 20 ms base RTT
    (dict(idle_p50=12.0), "idle_rtt"),     # below: the delay emulation is missing
])
def test_each_check_makes_a_run_degraded(tmp_path, kwargs, check):
    h = hl.assess(_write(tmp_path / "r", **kwargs))
    assert h["verdict"] == "degraded"
    assert h["checks"][check]["ok"] is False
    assert len(h["problems"]) == 1, h["problems"]


def test_an_idle_link_is_not_judged(tmp_path):
    h = hl.assess(_write(tmp_path / "r", backlog=0))
    assert h["checks"]["work_conservation:s0-eth2:pfifo"]["ok"] is None
    assert h["verdict"] == "healthy"


def test_goodput_is_what_the_receivers_got_over_the_common_window(tmp_path):
    """Two flows that live one after the other, each at the full 1 Mbit/s of the link for
    half the run: the link delivered 1 Mbit/s, not the 2 Mbit/s a sum of per-flow rates
    says (the aggregation that reported 37 Mbit/s on a 10 Mbit/s link). Their iperf3
    intervals count what the sender wrote (a socket buffer filled at once), and are not
    the goodput."""
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": 1.0},
                    network={"topology": {"receiver": "h2"}})
    rows = []
    for flow, start in (("a", 0.0), ("b", 5.0)):
        for ti in np.arange(start, start + 5.001, 0.1):
            rows.append({"t": ti, "flow": flow, "host": "h1", "cca": "cubic",
                         "bytes_acked": round((ti - start) * 1e6 / 8)})
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], rows)
    w.add_rows("iperf", SERIES_COLUMNS["iperf"], [
        {"flow": "b", "t_start": 5.0, "t_end": 5.1, "bytes": 4_000_000,
         "bits_per_second": 320e6, "retransmits": 0}])
    w.close("ok")
    got = {(r["scope"], r["name"], r["metric"]): r["value"]
           for r in m.compute_metrics(load_run(tmp_path / "r"))}
    assert got[("network", "all", "goodput_up_mbit")] == pytest.approx(1.0, rel=0.01)
    assert got[("network", "all", "aggregate_throughput_mbit")] == pytest.approx(1.0, rel=0.01)
    assert got[("flow", "b", "throughput_mbit")] == pytest.approx(1.0, rel=0.01)
    assert got[("flow", "b", "sent_throughput_mbit")] == pytest.approx(320.0)
    h = hl.assess(load_run(tmp_path / "r"), m.compute_metrics(load_run(tmp_path / "r")))
    assert h["checks"]["goodput_possible:up"]["ok"]


def test_goodput_per_direction_of_a_two_way_load(tmp_path):
    """Downloads are sent by the receiver host: their goodput is the reverse direction's."""
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": 2.0},
                    network={"topology": {"receiver": "h2"}})
    rows = [{"t": ti, "flow": flow, "host": host, "bytes_acked": round(ti * mbit * 1e6 / 8)}
            for flow, host, mbit in (("up", "h1", 1.8), ("down", "h2", 1.5))
            for ti in np.arange(0, 10.001, 0.1)]
    w.add_rows("tcp", SERIES_COLUMNS["tcp"], rows)
    w.close("ok")
    got = metrics_flows.delivered_goodput(load_run(tmp_path / "r"))
    assert got == {"up": pytest.approx(1.8, rel=0.01), "down": pytest.approx(1.5, rel=0.01)}


@pytest.mark.parametrize("run_dir", sorted(find_runs(FIXTURES)))
def test_goodput_never_exceeds_the_link_on_recorded_runs(run_dir):
    run = load_run(run_dir)
    rate = run.bottleneck_mbit
    rev = run.params.get("reverse_mbit") or rate
    rows = m.compute_metrics(run, warmup_s=run.record.get("warmup_s") or 0.0)
    for r in rows:
        if r["scope"] == "network" and r["metric"].startswith("goodput_"):
            limit = rev if "down" in r["metric"] else rate
            assert r["value"] <= limit * health_series.MAX_GOODPUT_SHARE, (r, limit)


def test_a_degraded_run_gets_one_flag_that_names_the_emulator(tmp_path):
    from bufferbloat.plots.flags import flags
    run = _write(tmp_path / "r", send_share=0.3, flows=4)
    run.record["health"] = hl.assess(run)
    got = flags(run, m.compute_metrics(run))
    assert len(got) == 1 and "the emulator fell behind" in got[0]
    assert "work conservation" not in got[0] or "0.3" in got[0]
    assert not any("did not fill the link" in f for f in got)


def test_degraded_runs_are_marked_and_left_out_of_means(tmp_path, monkeypatch):
    from bufferbloat.plots import sweep as sw
    from bufferbloat.plots import sweep_tables
    good = _write(tmp_path / "a" / "rep-1", send_share=1.0)
    bad = _write(tmp_path / "a" / "rep-2", send_share=0.3)
    for run in (good, bad):
        run.record["health"] = hl.assess(run)
        with open(f"{run.dir}/result.json", "w") as f:
            json.dump(run.record, f)
    points = sw.load_points(tmp_path)
    rows = sweep_tables.table_rows(points)
    assert len(rows) == 1 and rows[0]["degraded"] == 1 and rows[0]["reps"] == 2
    assert rows[0]["utilization"] == pytest.approx(1.0, abs=0.01)   # the healthy one only
    assert "1 degraded, not averaged" in sweep_tables.table_markdown(rows)
    monkeypatch.setenv(sw.INCLUDE_DEGRADED_ENV, "1")
    assert sweep_tables.table_rows(sw.load_points(tmp_path))[0]["utilization"] == pytest.approx(
        0.65, abs=0.01)


def test_headline_names_the_problems(tmp_path):
    h = hl.assess(_write(tmp_path / "r", missed=300))
    line = hl.headline(h)
    assert line.startswith("health: degraded") and "missed 300 of 1000 ticks" in line
    assert hl.headline(None).startswith("health: unknown")


def test_lateness_is_the_launch_not_the_handshake_behind_a_full_queue(tmp_path):
    """iperf3's time zero comes a few round trips after its client is launched; behind an
    800 ms FIFO that is seconds: physics, not the emulator. The launch is judged."""
    run = _write(tmp_path / "r")
    for s in run.record["traffic_results"]:
        s["t_launch"], s["t_start"] = 1.2, 5.0
    assert hl.assess(run)["checks"]["flows_on_time"]["ok"]
    assert hl.assess(run)["checks"]["flows_on_time"]["time_zero_after_launch_max_s"] == 3.8
    run.record["traffic_results"][0]["t_launch"] = 9.0
    assert hl.assess(run)["verdict"] == "degraded"


def test_a_tools_own_clock_is_judged_when_it_has_one(tmp_path):
    """NetPerfMeter connects all its flows before its measurement starts (~6 round trips
    each, one after the other: 10.5 s for 40 flows on a 40 ms path). A flow's due time is
    the measurement's start + its first "on" (``first_on_s``), not its process's launch:
    10 s of connecting is lateness; a pre-connected tool whose schedule ran ahead of the
    run's origin started early."""
    run = _write(tmp_path / "r")
    for s in run.record["traffic_results"]:
        s["t_launch"], s["first_on_s"], s["t_start"] = 1.0, 1.1, 1.2
    assert hl.assess(run)["checks"]["flows_on_time"]["ok"]
    run.record["traffic_results"][1]["first_on_s"] = 11.5       # launched on time
    check = hl.assess(run)["checks"]["flows_on_time"]
    assert not check["ok"] and check["late"] == 1 and check["value"] == 10.5
    run.record["traffic_results"][1]["first_on_s"] = -2.5        # 3.5 s before it was due
    h = hl.assess(run)
    assert h["checks"]["flows_on_time"]["ok"] and h["verdict"] == "faulty"
    check = h["checks"]["starts_not_early"]
    assert not check["ok"] and check["early"] == 1 and "f2 3.50 s early" in check["what"]


def test_a_udp_stream_is_judged_by_its_first_send(tmp_path):
    """a.5's stream once began 2-4 s before its time (at the run's t0 + its start) with
    every run healthy: its record had no ``flow``. It is now a flow of the check: its
    sender's first send against the time its schedule gave it."""
    run = _write(tmp_path / "r")
    stream = {"name": "video", "kind": "UdpStream", "stream": "video", "flow": "video",
              "udp": True, "scheduled_s": 13.0, "t_launch": 13.01, "sent": 520,
              "received": 510, "bytes_received": 612_000}
    run.record["traffic_results"].append(stream)
    check = hl.assess(run)["checks"]["flows_on_time"]
    assert check["ok"] and check["flows"] == len(run.record["traffic_results"])
    stream["t_launch"] = 10.0                                   # 3 s before its time
    h = hl.assess(run)
    check = h["checks"]["starts_not_early"]
    assert not check["ok"] and check["early"] == 1 and "video" in check["what"]
    assert h["verdict"] == "faulty" and h["problems"] == []
    stream["t_launch"] = None                                   # it never sent
    check = hl.assess(run)["checks"]["flows_on_time"]
    assert not check["ok"] and check["never_started"] == 1


def test_overrun_beyond_the_flows_start_up_is_judged(tmp_path):
    run = _write(tmp_path / "r")
    run.record["traffic_overrun_s"] = 4.5
    for s in run.record["traffic_results"]:   # time zero 2 s after the launch
        s["t_launch"], s["t_start"] = 1.1, 3.1
    c = hl.assess(run)["checks"]["traffic_overrun"]
    assert c["ok"] and c["value"] == 2.5
    run.record["traffic_overrun_s"] = 5.5
    assert hl.assess(run)["checks"]["traffic_overrun"]["ok"] is False


def test_overrun_beyond_the_queues_drain_at_the_end_is_judged(tmp_path):
    """The tools' closing exchange crosses the queue held at the scheduled end twice
    (iperf3's TEST_END, then its results): 2.5 MB at 10 Mbit/s is 2 x 2 s more allowed
    (a 1000-packet FIFO at 2 Mbit/s: 2 x 6 s)."""
    run = _write(tmp_path / "r", backlog=2_500_000)
    run.record.update(traffic_start_s=1.0, duration_s=8.0, traffic_overrun_s=6.5)
    c = hl.assess(run)["checks"]["traffic_overrun"]
    assert c["drain_s"] == pytest.approx(2.0) and c["value"] == pytest.approx(2.5)
    assert c["ok"] and "2 drains of the queue" in c["what"]
    run.record["traffic_overrun_s"] = 7.5
    assert hl.assess(run)["checks"]["traffic_overrun"]["ok"] is False
    run.record.pop("traffic_start_s")                 # unknown end: nothing allowed
    assert hl.assess(run)["checks"]["traffic_overrun"]["drain_s"] == 0


def test_a_small_aqm_queue_that_empties_between_samples_is_not_blamed():
    """PIE at 5 ms and 10 Mbit/s holds ~6 kB: between two samples 10 ms apart the link
    could send 12.5 kB, so the queue may empty and the link idle for a reason. Such
    intervals are not judged; a queue holding more than one interval's worth is."""
    t = np.arange(0, 3.001, 0.01)
    sent = np.cumsum(np.full(t.size, 0.7 * RATE * 1e6 / 8 * 0.01))
    ratio, span = health_series.work_conservation(t, np.full(t.size, 6000.0), sent, RATE)
    assert ratio is None and span == 0.0
    ratio, span = health_series.work_conservation(t, np.full(t.size, 20000.0), sent, RATE)
    assert ratio == pytest.approx(0.7, rel=0.01) and span == pytest.approx(3.0, abs=0.02)


def test_htb_burst_only_where_timers_come_late(monkeypatch):
    """tc's one-MTU burst on a kernel with punctual timers (exact shaping, short
    transfers not sped up); 20 ms of the rate in the TCG VM, bounded by 1 MTU and 64 KiB."""
    from bufferbloat.net import bottleneck as bn
    monkeypatch.delenv(bn.HTB_BURST_ENV, raising=False)
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)
    assert bn.htb_burst_bytes(10) is None
    assert "burst" not in bn.shaped(None, "eth0", 10, ["pfifo"], "x")[1].argv
    monkeypatch.setenv("BUFFERBLOAT_GUEST_ACCEL", "tcg")
    assert bn.htb_burst_bytes(10) == 25_000
    assert bn.htb_burst_bytes(1.5) == 3750
    assert bn.htb_burst_bytes(0.1) == bn.HTB_MIN_BURST_BYTES
    assert bn.htb_burst_bytes(100) == bn.HTB_MAX_BURST_BYTES
    assert "25000b" in bn.shaped(None, "eth0", 10, ["pfifo"], "x")[1].argv


@pytest.mark.parametrize("hz, ok", [(160.0, True), (67.0, False)])
def test_a_pi_controller_slower_than_its_frequency_is_degraded(tmp_path, hz, ok):
    """The PI qdisc's updates (ctl_updates) must come at >= 95 % of freq_hz: 67 Hz of
    160 is what an overloaded TCG run measured."""
    w = RunWriter(tmp_path / "r")
    w.record.update(params={"bottleneck_mbit": RATE}, bottleneck_dev="s0-eth2",
                    network={"topology": {"receiver": "h2", "qdisc": {
                        "kind": "pi", "params": {"freq_hz": 160}}}})
    t = np.arange(0, 5.001, 0.01)
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": ti, "dev": "s0-eth2", "handle": "10:", "parent": "1:1", "kind": "pi",
         "qlen_pkts": 0, "backlog_bytes": 0, "sent_bytes": 0, "drops": 0,
         "ctl_updates": int(ti * hz)} for ti in t])
    w.close("ok")
    c = hl.assess(load_run(tmp_path / "r"))["checks"]["controller_rate:s0-eth2:pi"]
    assert c["ok"] is ok and c["rate_hz"] == pytest.approx(hz, rel=0.01)
