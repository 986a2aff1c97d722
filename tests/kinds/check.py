"""The run of a scenario with the ``pyflow`` kind (tests/kinds/pyflow.py) and what it
must leave; shared by the host and VM tests."""
import csv
import os

from bufferbloat.results.health_record import MAX_START_LATE_S, scheduled_entries
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.run.scenario import Scenario
from bufferbloat.traffic.base import KINDS
from tests.retries import observe
from tests.timing import UNDER_TCG

from . import pyflow

DURATION_S = 8


def scenario(**params):
    """A dumbbell with one pyflow transfer and pings (``params``: the topology's)."""
    assert KINDS["pyflow"] is pyflow.PyFlowPart
    return Scenario(name="t_pyflow", description="a traffic kind from a test module",
                    params=dict(bottleneck_mbit=10, qdisc="fifo", buffer_pkts=100,
                                cca="cubic", **params),
                    traffic=({"kind": "pyflow", "name": "py", "src": "h1", "dst": "h2",
                              "start": 0.1},
                             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2"}),
                    duration_s=DURATION_S, quick_duration_s=DURATION_S)


def run_and_check(out_root, rate_mbit, **params):
    """Run the scenario through the engine and check every place the new kind reaches."""
    run_dir = run_point(scenario(**params), duration_s=DURATION_S, out_root=str(out_root),
                        log=lambda *_: None)
    run = load_run(run_dir)
    rec = run.record
    assert rec["status"] == "ok", rec.get("error")
    # its rows: its own series
    with open(os.path.join(run_dir, "series", "pyflow.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [r["flow"] for r in rows] == ["py"]
    sent, received = int(rows[0]["bytes_sent"]), int(rows[0]["bytes_received"])
    assert sent == received > 0
    # the transfer crossed the bottleneck at its rate: its client writes for 0.9 of the
    # run, but what its socket buffer holds then still drains until the server stops
    # reading at the run's end (up to ~1.4 s more of link time: x1.2); slow start and
    # the first RTTs cost a few %. Measured 0.998 of the rate on the host kernel, 1.056
    # in the VM (CI, 2026-11-26)
    mbit = received * 8 / 1e6 / (0.9 * DURATION_S)
    print(f"pyflow: {mbit:.3f} Mbit/s over 0.9 of the run at {rate_mbit} Mbit/s")
    # the contract whatever the load: never above the link (x1.2 for the drain) and
    # at least half of it (a loaded TCG guest loses a few %, not half); the band
    # (0.85-1.2) recorded, judged by the acceptance tier's rate bands
    observe(f"pyflow goodput over the bottleneck rate{UNDER_TCG}", mbit / rate_mbit,
            0.85, 1.2)
    assert 0.5 * rate_mbit <= mbit <= 1.2 * rate_mbit, mbit
    # its outputs, its summary (scheduled at the part's start), its health check
    assert "RECEIVED" in run.raw("py.server.txt") and "SENT" in run.raw("py.client.txt")
    entry = next(e for e in rec["traffic_results"] if e.get("flow") == "py")
    assert entry["kind"] == "PyFlow" and entry["bytes_received"] == received
    assert abs(entry["scheduled_s"] - (rec["traffic_start_s"] + 0.1 * DURATION_S)) < 1e-6
    # launched at its due time: never early; late by at most what the health verdict
    # allows a healthy run (MAX_START_LATE_S: a TCG guest's launch takes ~1 s)
    late = entry["t_launch"] - entry["scheduled_s"]
    assert -1e-6 <= late <= MAX_START_LATE_S, late
    # flows_on_time judges every scheduled part: the new kind's flow and the ping beside it
    on_time = rec["health"]["checks"]["flows_on_time"]
    assert on_time["flows"] == len(scheduled_entries(rec)) == 2, on_time
    assert {e.get("flow") or e.get("probe") for _, e in scheduled_entries(rec)} >= {"py"}
    # its socket, sampled and labelled with its name; the pings of the kind beside it
    tcp = run.series("tcp")
    assert set(tcp["flow"]) == {"py"}
    assert len(tcp["t"]) > 10
    assert run.has("ping")
    return run
