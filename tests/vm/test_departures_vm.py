"""Departure timing in the project VM (TCG, every qdisc): the departure trace and the sender
check on real study points.

* a2_pie, quick profile: result.json holds ``departure_timing:s0-eth2:pie`` with a value
  (the compiled reader, no event lost), judged ok against its limit (the 20 ms burst +
  1 ms; healthy VM points measured 1.5-3.5 ms, docs/design/health.md), and the run's report
  shows its figure; the greedy flow kept its socket full (``sender_kept_up``).
* a1_fifo, quick profile at 10 Mbit/s, its iperf3 client stopped (SIGSTOP by PID, as a
  CPU-starved sender) for 8 s in the middle of the judged window: the run is degraded
  by ``sender_kept_up`` (its idle share between 10 % and the stop over the window; the
  socket's buffer, up to tcp_wmem's 4 MB, takes up to 3.3 s to drain at that rate: at
  the point's own 1.5 Mbit/s a 4 s stop never emptied it, measured).
"""
import os

import pytest

from bufferbloat import summary
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.scenarios import catalogue
from tests.recipes import stop_iperf_clients
from tests.retries import band, run_until_healthy_counted

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance



def test_a2_pie_quick_records_its_departures(tmp_path, net_guard):
    scn = catalogue()["a2_pie"]
    run_dir, _ = run_until_healthy_counted(
        lambda: run_point(scn, {}, quick=True, out_root=str(tmp_path),
                          log=lambda *_: None), retries=2)
    run = load_run(run_dir)
    info = run.record["departures"]
    assert info["traced"] and info["reader"] == "c" and info["lost_events"] == 0, info
    assert info["machine"] == "tcg" and not info.get("reader_error")
    c = run.record["health"]["checks"]["departure_timing:s0-eth2:pie"]
    print({k: c[k] for k in ("value", "limit", "backlogged_gaps", "within_10pct",
                             "sojourn_excess_ms_p50")})
    assert c["value"] is not None, c
    # the bands before the check's verdict on them, so that a miss is recorded too
    band("backlogged gaps", c["backlogged_gaps"], lo=501)
    band("departure gap error p99", c["value"], hi=21.0, unit="ms")
    assert c["ok"] is True and c["limit"] == "<= 21.000 ms", c
    s = run.record["health"]["checks"]["sender_kept_up"]
    assert s["ok"] is True and s["judged"] >= 1, s
    summary.finish(run_dir)
    with open(os.path.join(run_dir, "report.html")) as f:
        page = f.read()
    assert 'alt="departures: ' in page             # embedded, named
    assert os.path.getsize(os.path.join(run_dir, "figures", "departures.png")) > 10_000


def test_a_stopped_sender_is_degraded_in_the_vm(tmp_path, net_guard, monkeypatch):
    # the quick a1 point: 20 s, judged from 1.7 s to 19 s
    stopped = stop_iperf_clients(monkeypatch, 6.0, 8.0)
    scn = catalogue()["a1_fifo"]
    run = load_run(run_point(scn, {"bottleneck_mbit": 10}, quick=True, out_root=str(tmp_path),
                             log=lambda *_: None))
    assert stopped
    h = run.record["health"]
    c = h["checks"]["sender_kept_up"]
    flow = max(c["flows"], key=lambda f: f["app_limited_share"])
    print(flow)
    # the band before the check's verdict on it, so that a miss is recorded too
    band("app-limited share, stopped sender", flow["app_limited_share"], 0.10,
         8.0 / flow["window_s"] + 0.02)
    assert c["ok"] is False and h["verdict"] == "degraded", c
