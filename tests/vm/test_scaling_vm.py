"""Scaled runs are the study's runs for what physics keeps: study E
(80 Mbit/s, 5 NewReno flows, 15 ms RTT) under CAKE, quick profile, run at two caps in
the project VM (BUFFERBLOAT_MAX_MBIT 10 and 20: x0.125 and x0.25 of the study's rate,
buffers scaled alike, every delay kept).

Invariant (a delay held fixed, a share of a link): utilization within 0.05, the mean
queueing delay and CAKE's own delay at 10 Mbit/s 0.7-2x those at 20 (a CoDel-based AQM's
delay rises as the rate falls: see below), Jain's index within 0.05. Measured by
bench/bench_scaling.py (docs/design/scaling.md, 2026-11-26) at 5/10/20 Mbit/s: utilization
0.986/0.987/0.979, queueing delay 8.51/7.44/7.37 ms, CAKE's delay 6.98/6.95/7.33 ms,
Jain 0.999/0.997/0.999; this test's first run at 10/20: utilization 0.981/0.982,
queueing delay 9.96/8.13 ms, CAKE's delay 10.7/8.5 ms, Jain 0.996/1.000; a CI run on
2026-11-27 at 10/20: queueing delay 13.77/9.87 ms, CAKE's delay 16.63/10.07 ms (x1.65,
6.6 ms apart: it failed the earlier bound of 4 ms), both runs healthy. The ratios seen:
0.95-1.65.

Not invariant, and asserted so (a test that would pass for a scaling that changed
nothing would prove nothing): the queue holds twice the packets per ms of delay at twice
the rate (Little: packets = rate x delay; first run 0.83 -> 1.65 packets per ms, x2.0;
asserted x1.6 to x2.5), and the drop % falls as
the rate rises (a flow's window in packets grows with the rate, and TCP's loss rate
falls as its window grows, Mathis: p ~ 1/W^2, x4 for x2; measured 5.31 -> 1.60 %,
x3.3; asserted at least x1.5).
"""
import json
import os

import pytest

from bufferbloat.results.headline import select
from bufferbloat.results.health import headline
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.run.watch import RETRY_DEGRADED
from bufferbloat.scenarios import catalogue
from tests.retries import band, require_healthy, run_until_healthy_counted

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance


CAT = catalogue()


def _run_at(out, cap, monkeypatch):
    monkeypatch.setenv("BUFFERBLOAT_MAX_MBIT", str(cap))
    scn = CAT["e1_aqm_kflows"]
    run_dir, _ = run_until_healthy_counted(
        lambda: run_point(scn, {"variant": "cake"}, out_root=out, quick=True, log=print),
        RETRY_DEGRADED, log=lambda line: print(f"cake at {cap}: {line}"))
    run = load_run(run_dir)
    assert run.record["status"] == "ok"
    require_healthy(run.record["health"], f"cake at {cap} Mbit/s")
    assert run.record["scaling"]["max_rate_mbit"] == cap
    with open(os.path.join(run_dir, "metrics.json")) as f:
        rows = json.load(f)["metrics"]
    print(f"cake at {cap} Mbit/s: {headline(run.record['health'])}")
    return {k: select(rows, sel) for k, sel in (
        ("util", "link:utilization"), ("qdelay", "link:qdelay_mean_ms"),
        ("aqm", "link:aqm_delay_mean_ms"), ("jain", "network:all:jain_fairness"),
        ("drop", "link:drop_pct"), ("qlen", "link:qlen_mean_pkts"))}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("scaling"))


def test_a_scaled_run_keeps_utilization_delay_and_fairness_not_packets(out, monkeypatch,
                                                                       net_guard):
    low, high = _run_at(out, 10, monkeypatch), _run_at(out, 20, monkeypatch)
    print(f"10 Mbit/s: {low}\n20 Mbit/s: {high}")
    band("utilization, 10 - 20 Mbit/s", low["util"] - high["util"], -0.05, 0.05)
    # CAKE is CoDel-based (COBALT): like FQ-CoDel's (docs/design/scaling.md: 11.8 ms at 20
    # Mbit/s, 16.9 at 10), its delay may rise as the rate falls, where a packet lasts
    # longer against its 5 ms target: the 10 Mbit/s delay 0.7-2x the 20 Mbit/s one
    for key, what in (("qdelay", "mean queueing delay"), ("aqm", "CAKE's mean delay")):
        band(f"{what}, 10 over 20 Mbit/s", low[key] / max(high[key], 1e-9), 0.7, 2.0)
    band("Jain's index, 10 - 20 Mbit/s", low["jain"] - high["jain"], -0.05, 0.05)
    # what a rate scaling does not keep
    per_ms = [r["qlen"] / r["qdelay"] for r in (low, high)]
    band("queued packets per ms of delay, 20 over 10 Mbit/s", per_ms[1] / per_ms[0], 1.6, 2.5)
    band("drop %, 10 over 20 Mbit/s", low["drop"] / max(high["drop"], 1e-9), lo=1.5)
    assert low["drop"] >= 1.5 * high["drop"] > 0
