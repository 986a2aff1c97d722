"""irtt's JSON parsed into per-probe RTT, one-way delays and loss per direction, on real
outputs captured between two network namespaces (tests/fixtures/tools/irtt/, see its
README): an idle link, a test stopped by SIGTERM, loss in each direction through a
dropping relay, and a queue in the client's egress. What the parser and the metrics
derive is checked against irtt's own summary of the same test."""
import json
import math
import os

import pytest
from conftest import FIXTURES

from bufferbloat.core.errors import UsageError
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.core.stats import loss_figures, percentile
from bufferbloat.results import metrics as m
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter
from bufferbloat.traffic.irtt import (
    IrttPart,
    IrttProbe,
    client_args,
    duration_arg,
    parse_irtt,
    server_args,
)

IRTT = os.path.join(FIXTURES, "tools", "irtt")


def doc(name):
    with open(os.path.join(IRTT, name)) as f:
        return json.load(f)


def ms(ns):
    return ns / 1e6


def test_idle_probes_match_irtt_per_probe_and_in_summary():
    d = doc("idle.json")
    probes = parse_irtt(d)
    assert [p["seq"] for p in probes] == list(range(20))
    assert all(p["lost"] == "" for p in probes)
    for p, rt in zip(probes, d["round_trips"]):
        assert p["rtt_ms"] == ms(rt["delay"]["rtt"])
        assert p["owd_up_ms"] == ms(rt["delay"]["send"])
        assert p["owd_down_ms"] == ms(rt["delay"]["receive"])
        assert p["sent_wall_s"] == rt["timestamps"]["client"]["send"]["wall"] / 1e9
        # one clock for both ends: the two one-way delays add up to the round trip
        # (irtt's rtt leaves the server's processing time out, as the sum does)
        assert p["owd_up_ms"] + p["owd_down_ms"] == pytest.approx(p["rtt_ms"], abs=0.02)
    gaps = [b["sent_wall_s"] - a["sent_wall_s"] for a, b in zip(probes, probes[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(0.05, abs=0.002)   # -i 50ms
    rtts = sorted(p["rtt_ms"] for p in probes)
    assert percentile(rtts, 50) == pytest.approx(ms(d["stats"]["rtt"]["median"]), abs=1e-6)
    assert sum(rtts) / len(rtts) == pytest.approx(ms(d["stats"]["rtt"]["mean"]), abs=1e-3)
    assert max(rtts) == ms(d["stats"]["rtt"]["max"])


def test_loss_told_apart_by_direction_as_irtt_counts_it():
    d = doc("loss.json")
    probes = parse_irtt(d)
    lost = [p["lost"] for p in probes]
    assert lost.count("up") == 22 and lost.count("down") == 6 and "unknown" not in lost
    for p in probes:
        if p["lost"]:
            assert p["rtt_ms"] is p["owd_up_ms"] is p["owd_down_ms"] is None
            assert p["sent_wall_s"] is not None     # a lost probe keeps its send time
    fig = loss_figures(lost)
    s = d["stats"]
    assert fig["sent"] == s["packets_sent"] == 99
    assert fig["received"] == s["packets_received"] == 71
    assert fig["loss_pct"] == pytest.approx(s["packet_loss_percent"])
    assert fig["loss_up_pct"] == pytest.approx(s["upstream_loss_percent"])      # 22.2 %
    assert fig["loss_down_pct"] == pytest.approx(s["downstream_loss_percent"])  # 7.79 %


def test_loss_figures_unknown_direction_and_empty():
    fig = loss_figures(["", "up", "down", "unknown", "", ""])
    assert fig == {"sent": 6, "received": 3, "loss_pct": 50.0,
                   "loss_up_pct": pytest.approx(100 / 6), "loss_down_pct": 25.0}
    assert loss_figures([])["loss_pct"] is None


def test_queue_in_one_direction_shows_in_that_one_way_delay():
    probes = parse_irtt(doc("loaded.json"))
    up = sorted(p["owd_up_ms"] for p in probes)
    down = sorted(p["owd_down_ms"] for p in probes)
    rtt = sorted(p["rtt_ms"] for p in probes)
    # the requests wait behind a full 100-packet FIFO at 10 Mbit/s (up to 121 ms),
    # the replies cross an idle link
    assert 50 < percentile(up, 50) < 125
    assert percentile(down, 95) < 1.0
    assert percentile(rtt, 50) == pytest.approx(percentile(up, 50), abs=1.0)


def test_stopped_client_still_gives_its_probes():
    d = doc("stopped.json")
    probes = parse_irtt(d)
    assert len(probes) == d["stats"]["packets_sent"] == 21
    span = probes[-1]["sent_wall_s"] - probes[0]["sent_wall_s"]
    assert 0.9 < span < 1.1                  # SIGTERM after ~1.05 s of a 10 s test


def test_lost_as_boolean_is_read_too():
    d = doc("idle.json")
    d["round_trips"][3]["lost"] = False
    d["round_trips"][4]["lost"] = True
    probes = parse_irtt(json.dumps(d))
    assert probes[3]["lost"] == "" and probes[4]["lost"] == "unknown"
    assert probes[4]["rtt_ms"] is None


def test_rows_on_the_run_clock_and_summary():
    d = doc("loss.json")
    probe = IrttProbe(None, "h1", "h2", 2.0, 0.02, 172, port=5600, name="udp",
                      t0=100.0, realtime_minus_monotonic=1.7e9)
    probe.probes = parse_irtt(d)
    probe.stats = d["stats"]
    rows = probe.rows()
    assert [list(r) for r in rows] == [list(SERIES_COLUMNS["irtt"])] * 99
    first = d["round_trips"][0]["timestamps"]["client"]["send"]["wall"] / 1e9
    assert rows[0]["t"] == pytest.approx(first - 1.7e9 - 100.0, abs=1e-6)
    assert [r["lost"] for r in rows].count("up") == 22
    assert all(r["rtt_ms"] == "" for r in rows if r["lost"])
    s = probe.summary()
    assert s["loss_up_pct"] == pytest.approx(d["stats"]["upstream_loss_percent"])
    assert s["rtt_p50_ms"] == pytest.approx(ms(d["stats"]["rtt"]["median"]), abs=1e-6)
    assert s["owd_up_mean_ms"] == pytest.approx(ms(d["stats"]["send_delay"]["mean"]),
                                                abs=1e-3)
    assert s["irtt_server_packets_received"] == 77


def test_arguments_are_lists_in_go_durations():
    assert duration_arg(0.2) == "200000us" and duration_arg(60) == "60000000us"
    assert duration_arg(1e-4) == "100us"          # never "1e-04s"
    args = client_args("10.0.0.2", 5600, 0.1, 20, 172, out="/tmp/x.json.gz")
    assert args == ["irtt", "client", "-o", "/tmp/x.json.gz", "-Q", "--fill=rand", "-d",
                    "20000000us", "-i", "100000us", "-l", 172, "10.0.0.2:5600"]
    assert "-l" not in client_args("10.0.0.2", 5600, 0.1, 20)
    assert server_args("10.0.0.2", 5600) == ["irtt", "server", "-b", "10.0.0.2:5600",
                                             "-i", "0"]


def test_spec_checked_before_anything_runs():
    good = {"kind": "irtt", "name": "u", "client": "h1", "server": "h2",
            "interval_s": 0.1, "start": 0, "stop": 1}
    IrttPart.check_spec(good)
    for bad in ({"interval_s": 0}, {"length_bytes": 9000}, {"interval": 0.1}):
        with pytest.raises(UsageError):
            IrttPart.check_spec({**good, **bad})


def test_metrics_of_irtt_series(tmp_path):
    d = doc("loss.json")
    probe = IrttProbe(None, "h1", "h2", 2.0, 0.02, name="udp", t0=0.0,
                      realtime_minus_monotonic=0.0)
    probe.probes = parse_irtt(d)
    w = RunWriter(str(tmp_path / "run"))
    w.start_clock()
    w.add_rows("irtt", SERIES_COLUMNS["irtt"], probe.rows())
    w.close("ok")
    rows = {r["metric"]: r["value"] for r in m.compute_metrics(load_run(w.dir))
            if r["scope"] == "irtt" and r["name"] == "udp"}
    s = d["stats"]
    assert rows["loss_up_pct"] == pytest.approx(s["upstream_loss_percent"])
    assert rows["loss_down_pct"] == pytest.approx(s["downstream_loss_percent"])
    assert rows["loss_pct"] == pytest.approx(s["packet_loss_percent"])
    assert rows["rtt_p50_ms"] == pytest.approx(ms(s["rtt"]["median"]), abs=1e-6)
    assert rows["rtt_mean_ms"] == pytest.approx(ms(s["rtt"]["mean"]), abs=1e-3)
    assert rows["owd_up_mean_ms"] == pytest.approx(ms(s["send_delay"]["mean"]), abs=1e-3)
    assert rows["owd_down_p50_ms"] == pytest.approx(ms(s["receive_delay"]["median"]),
                                                    abs=1e-6)
    assert {"rtt_p95_ms", "owd_up_p95_ms", "owd_down_p95_ms", "rtt_max_ms"} <= set(rows)
    assert not any(math.isnan(v) for v in rows.values())
