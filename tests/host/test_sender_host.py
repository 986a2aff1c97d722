"""The sender-side check on the host kernel (HTB + pfifo at 10 Mbit/s, no delay): a greedy
iperf3 flow keeps its socket's write queue full (tcpi_busy_time, sampled every 10 ms)
for all of the judged window; the same flow with its client process stopped (SIGSTOP
by PID, the way a sender starved of CPU behaves) for 3 s in the middle of the window
empties its socket once the kernel has sent what it held, and the run is marked
degraded by ``sender_kept_up`` (limit 5 %, docs/design/health.md).

Measured on this machine kind (2026-11-25): 0.0 % idle unthrottled; throttled 22.8 %
of an 11.8 s window (the 3 s stop less the 0.3 s the socket's buffer took to drain;
asserted between 10 % and the stop's 3 s over the window)."""
import pytest

from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.scenarios import catalogue
from tests.recipes import stop_iperf_clients
from tests.retries import band

#: physics and timing bands: the acceptance tier judges them (tests/retries.py)
pytestmark = pytest.mark.acceptance


DURATION_S = 14    # warm-up 5/60 of it (1.2 s): judged from 1.2 s to 13 s after the start
STOP_AT_S, STOP_FOR_S = 6.0, 3.0


def _run(tmp_path):
    scn = catalogue()["a1_fifo"]
    run_dir = run_point(scn, {"delay_ms": 0, "bottleneck_mbit": 10},
                        duration_s=DURATION_S, out_root=str(tmp_path), log=lambda *_: None)
    return load_run(run_dir)


def test_a_greedy_sender_keeps_its_socket_full(tmp_path, net_guard):
    run = _run(tmp_path / "free")
    c = run.record["health"]["checks"]["sender_kept_up"]
    assert c["judged"] == 1, c
    (flow,) = c["flows"]
    print("flow:", flow)
    assert flow["flow"] == "long"
    # the bands before the check's verdict on them, so that a miss is recorded too
    band("judged window", flow["window_s"], lo=DURATION_S - 1.2 - 1 - 0.5, unit="s")
    band("app-limited share", flow["app_limited_share"], hi=0.01)
    assert c["ok"] is True, c


def test_a_stopped_sender_is_marked_degraded(tmp_path, net_guard, monkeypatch):
    stopped = stop_iperf_clients(monkeypatch, STOP_AT_S, STOP_FOR_S)
    run = _run(tmp_path / "stopped")
    assert stopped, "the client was not stopped"
    h = run.record["health"]
    c = h["checks"]["sender_kept_up"]
    (flow,) = c["flows"]
    print("flow:", flow)
    # the band before the check's verdict on it, so that a miss is recorded too (its
    # upper bound, the stop's share of the judged window, varies a little run to run)
    band("app-limited share, client stopped 3 s", flow["app_limited_share"], 0.10,
         STOP_FOR_S / flow["window_s"] + 0.02)
    assert c["ok"] is False and h["verdict"] == "degraded", c
    assert any("greedy flow" in p for p in h["problems"])
